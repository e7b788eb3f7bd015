//! Core errors → `dev.fencelock.LockException(code, message, lock, backend, retryable)`: the core error's fields,
//! none parsed out of a message. And the one wrapper every native method runs in.

use fencelock::ErrorKind;
use jni::errors::ThrowRuntimeExAndDefault;
use jni::objects::{JClass, JObject, JThrowable};
use jni::sys::{jboolean, jint};
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

/// Whether errors of kind `code` may succeed if retried, by core's table: `ErrorKind.java` keeps a copy for errors
/// made in Java, and a test checks it against this.
#[unsafe(no_mangle)]
pub extern "system" fn Java_dev_fencelock_Native_kindRetryable<'l>(
    _env: EnvUnowned<'l>,
    _class: JClass<'l>,
    code: jint,
) -> jboolean {
    ErrorKind::ALL.into_iter().any(|k| k.code() as jint == code && k.retryable())
}

/// A core error as the Java arguments `(int code, String message, String lock, String backend, boolean retryable)`
/// of `LockException`'s native constructor and `Completion.fail`; lock and backend are null when unknown.
pub(crate) struct ErrorArgs<'l> {
    code: i32,
    message: JObject<'l>,
    lock: JObject<'l>,
    backend: JObject<'l>,
    retryable: bool,
}

impl<'l> ErrorArgs<'l> {
    pub(crate) fn new(env: &mut Env<'l>, e: &fencelock::Error) -> jni::errors::Result<Self> {
        let mut string = |s: Option<&str>| -> jni::errors::Result<JObject<'l>> {
            Ok(match s {
                Some(s) => env.new_string(s)?.into(),
                None => JObject::null(),
            })
        };
        Ok(ErrorArgs {
            code: e.kind().code() as i32,
            message: string(Some(&e.detail()))?,
            lock: string(e.lock())?,
            backend: string(e.backend())?,
            retryable: e.retryable(),
        })
    }

    pub(crate) fn values(&self) -> [JValue<'_>; 5] {
        [
            JValue::Int(self.code),
            JValue::Object(&self.message),
            JValue::Object(&self.lock),
            JValue::Object(&self.backend),
            JValue::Bool(self.retryable),
        ]
    }
}

/// Throws `LockException(code, message, lock, backend, retryable)` on the calling (Java) thread.
fn throw(env: &mut Env<'_>, e: &fencelock::Error) -> jni::errors::Result<()> {
    if env.exception_check() {
        return Ok(()); // something is already being thrown
    }
    let args = ErrorArgs::new(env, e)?;
    let obj: JObject<'_> = env.new_object(
        jni_str!("dev/fencelock/LockException"),
        jni_sig!("(ILjava/lang/String;Ljava/lang/String;Ljava/lang/String;Z)V"),
        &args.values(),
    )?;
    let throwable = env.cast_local::<JThrowable>(obj)?;
    match env.throw(throwable) {
        Ok(()) | Err(jni::errors::Error::JavaException) => Ok(()),
        Err(e) => Err(e),
    }
}
