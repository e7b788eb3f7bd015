//! Core errors → `dev.fencelock.LockException(code, message, lock, backend, retryable)`: the core error's fields,
//! none parsed out of a message. And the one wrapper every native method runs in.

use jni::errors::ThrowRuntimeExAndDefault;
use jni::objects::{JObject, JThrowable};
use jni::{Env, EnvUnowned, JValue, jni_sig, jni_str};

/// Why a native method failed: a fencelock error (thrown as `LockException`) or a JNI failure (a pending Java
/// exception, or one `jni` throws as a `RuntimeException`).
#[derive(Debug)]
pub(crate) enum Fail {
    Lock(fencelock::Error),
    Jni(jni::errors::Error),
}

impl From<fencelock::Error> for Fail {
    fn from(e: fencelock::Error) -> Self {
        Fail::Lock(e)
    }
}

impl From<jni::errors::Error> for Fail {
    fn from(e: jni::errors::Error) -> Self {
        Fail::Jni(e)
    }
}

/// Runs the body of a native method: errors become Java exceptions and the method returns `T::default()`; a panic
/// becomes a `RuntimeException` instead of unwinding into the JVM.
pub(crate) fn shim<'l, T: Default>(env: &mut EnvUnowned<'l>, f: impl FnOnce(&mut Env<'l>) -> Result<T, Fail>) -> T {
    env.with_env(|env| -> jni::errors::Result<T> {
        match f(env) {
            Ok(v) => Ok(v),
            Err(Fail::Lock(e)) => {
                throw(env, &e)?;
                Ok(T::default())
            }
            Err(Fail::Jni(e)) => Err(e),
        }
    })
    .resolve::<ThrowRuntimeExAndDefault>()
}

/// `e`'s message (naming its lock and backend), lock and backend as Java strings (null when unknown).
pub(crate) fn fields<'l>(env: &mut Env<'l>, e: &fencelock::Error) -> jni::errors::Result<[JObject<'l>; 3]> {
    let message = env.new_string(e.detail())?.into();
    let mut opt = |s: Option<&str>| -> jni::errors::Result<JObject<'l>> {
        Ok(match s {
            Some(s) => env.new_string(s)?.into(),
            None => JObject::null(),
        })
    };
    Ok([message, opt(e.lock())?, opt(e.backend())?])
}

/// Throws `LockException(code, message, lock, backend, retryable)` on the calling (Java) thread.
fn throw(env: &mut Env<'_>, e: &fencelock::Error) -> jni::errors::Result<()> {
    if env.exception_check() {
        return Ok(()); // something is already being thrown
    }
    let [message, lock, backend] = fields(env, e)?;
    let obj: JObject<'_> = env.new_object(
        jni_str!("dev/fencelock/LockException"),
        jni_sig!("(ILjava/lang/String;Ljava/lang/String;Ljava/lang/String;Z)V"),
        &[
            JValue::Int(e.kind().code() as i32),
            JValue::Object(&message),
            JValue::Object(&lock),
            JValue::Object(&backend),
            JValue::Bool(e.retryable()),
        ],
    )?;
    let throwable = env.cast_local::<JThrowable>(obj)?;
    match env.throw(throwable) {
        Ok(()) | Err(jni::errors::Error::JavaException) => Ok(()),
        Err(e) => Err(e),
    }
}
