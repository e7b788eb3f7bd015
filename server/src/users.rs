//! Optional password authentication the etcd way (`--users FILE`), so etcd clients configured with a user name and
//! password work unchanged: `Auth.Authenticate` checks them against the file and answers a token, and calls that carry
//! it in the `token` metadata run as that user. With a users file every lease and lock call needs a valid token or,
//! with `--client-ca`, a client certificate.
//!
//! The file: one `NAME:pbkdf2-sha256:ITERATIONS:SALT-HEX:HASH-HEX` line per user (`fencelockd --hash-password NAME`
//! prints one), `#` comments and blank lines. Tokens expire after `TOKEN_IDLE` unused, as etcd's simple tokens do;
//! etcd's clients then authenticate again by themselves.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ring::pbkdf2;
use tonic::service::Interceptor;
use tonic::{Request, Response, Status};

use crate::etcd::header;
use crate::identity::Identity;
use crate::proto::etcdserverpb::auth_server::Auth;
use crate::proto::etcdserverpb::{AuthenticateRequest, AuthenticateResponse};

const SCHEME: &str = "pbkdf2-sha256";
const ALGORITHM: pbkdf2::Algorithm = pbkdf2::PBKDF2_HMAC_SHA256;
/// Iterations `--hash-password` uses (OWASP's advice for PBKDF2-HMAC-SHA256 is far higher; this keeps a login
/// under a second on a slow machine, and the file can name any count).
const ITERATIONS: u32 = 100_000;
/// A token unused this long is forgotten.
const TOKEN_IDLE: Duration = Duration::from_secs(300);
/// Most live tokens; past it the least recently used goes.
const MAX_TOKENS: usize = 10_000;
/// The metadata key etcd's clients send their token under.
const TOKEN_KEY: &str = "token";

#[derive(Debug)]
struct Hash {
    iterations: NonZeroU32,
    salt: Vec<u8>,
    hash: Vec<u8>,
}

/// The users file and the tokens handed out.
#[derive(Debug)]
pub struct Users {
    hashes: HashMap<String, Hash>,
    tokens: Mutex<HashMap<String, (Arc<str>, Instant)>>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.is_empty() || !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

impl Users {
    /// Reads the users file; an error names the file and the line (never a hash).
    pub fn load(path: &std::path::Path) -> Result<Users, String> {
        let shown = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| format!("--users {shown}: cannot be read: {e}"))?;
        let mut hashes = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = || format!("--users {shown} line {}: not NAME:{SCHEME}:ITERATIONS:SALT-HEX:HASH-HEX", n + 1);
            let fields: Vec<&str> = line.split(':').collect();
            let [name, scheme, iterations, salt, hash] = fields[..] else { return Err(bad()) };
            let iterations = iterations.parse::<NonZeroU32>().map_err(|_| bad())?;
            let (Some(salt), Some(hash)) = (unhex(salt), unhex(hash)) else { return Err(bad()) };
            if name.is_empty() || scheme != SCHEME {
                return Err(bad());
            }
            if hashes.insert(name.to_string(), Hash { iterations, salt, hash }).is_some() {
                return Err(format!("--users {shown} line {}: user {name:?} is listed twice", n + 1));
            }
        }
        Ok(Users { hashes, tokens: Mutex::default() })
    }

    /// A users file line for `name` with `password`, under a fresh random salt.
    pub fn hash_line(name: &str, password: &str) -> String {
        let salt: [u8; 16] = rand::random();
        let mut hash = [0u8; 32];
        let iterations = NonZeroU32::new(ITERATIONS).expect("nonzero");
        pbkdf2::derive(ALGORITHM, iterations, &salt, password.as_bytes(), &mut hash);
        format!("{name}:{SCHEME}:{ITERATIONS}:{}:{}", hex(&salt), hex(&hash))
    }

    /// A fresh token for `name` if `password` is its password.
    fn authenticate(&self, name: &str, password: &str) -> Option<String> {
        let user = self.hashes.get(name)?;
        pbkdf2::verify(ALGORITHM, user.iterations, &user.salt, password.as_bytes(), &user.hash).ok()?;
        let token = hex(&rand::random::<[u8; 16]>());
        let now = Instant::now();
        let mut tokens = self.tokens.lock().expect("token table lock");
        tokens.retain(|_, (_, used)| now.duration_since(*used) < TOKEN_IDLE);
        if tokens.len() >= MAX_TOKENS
            && let Some(oldest) = tokens.iter().min_by_key(|(_, (_, used))| *used).map(|(t, _)| t.clone())
        {
            tokens.remove(&oldest);
        }
        tokens.insert(token.clone(), (name.into(), now));
        Some(token)
    }

    /// The user a live token stands for; using it restarts its idle time.
    fn user(&self, token: &str) -> Option<Arc<str>> {
        let mut tokens = self.tokens.lock().expect("token table lock");
        let (name, used) = tokens.get_mut(token)?;
        if used.elapsed() >= TOKEN_IDLE {
            tokens.remove(token);
            return None;
        }
        *used = Instant::now();
        Some(name.clone())
    }
}

/// Resolves each call's token into its identity before the lease and lock services see it (a no-op without a users
/// file). A call with neither a token nor a client certificate is refused.
#[derive(Debug, Clone, Default)]
pub struct Authenticator(pub Option<Arc<Users>>);

impl Interceptor for Authenticator {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        let Some(users) = &self.0 else { return Ok(req) };
        match req.metadata().get(TOKEN_KEY).map(|t| t.to_str()) {
            Some(Ok(token)) => {
                // etcd's words, so its clients authenticate again and retry.
                let user =
                    users.user(token).ok_or_else(|| Status::unauthenticated("etcdserver: invalid auth token"))?;
                req.extensions_mut().insert(Identity::User(user));
                Ok(req)
            }
            Some(Err(_)) => Err(Status::unauthenticated("etcdserver: invalid auth token")),
            None if req.peer_certs().is_some_and(|c| !c.is_empty()) => Ok(req),
            None => Err(Status::unauthenticated(
                "fencelockd: authentication required (--users): authenticate with a user name and password first",
            )),
        }
    }
}

/// etcd's `Auth` service: `Authenticate` only.
#[derive(Debug, Clone)]
pub struct EtcdAuth(pub Arc<Users>);

#[tonic::async_trait]
impl Auth for EtcdAuth {
    async fn authenticate(&self, req: Request<AuthenticateRequest>) -> Result<Response<AuthenticateResponse>, Status> {
        let req = req.into_inner();
        let users = self.0.clone();
        // PBKDF2 is deliberately slow: off the async workers.
        let (name, token) = tokio::task::spawn_blocking(move || {
            let token = users.authenticate(&req.name, &req.password);
            (req.name, token)
        })
        .await
        .map_err(|_| Status::internal("fencelockd: the password check ended without a result"))?;
        let Some(token) = token else {
            tracing::warn!(user = %name, "authentication failed");
            // etcd's status for it, which its clients know.
            return Err(Status::invalid_argument("etcdserver: authentication failed, invalid user ID or password"));
        };
        tracing::info!(user = %name, "authenticated");
        Ok(Response::new(AuthenticateResponse { header: header(0), token }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> Result<Users, String> {
        let path = std::env::temp_dir().join(format!("fencelockd-users-{}", rand::random::<u64>()));
        std::fs::write(&path, text).unwrap();
        let users = Users::load(&path);
        std::fs::remove_file(&path).unwrap();
        users
    }

    #[test]
    fn a_hashed_password_authenticates_and_its_token_names_the_user() {
        let users = file(&format!("# test\n\n{}\n", Users::hash_line("alice", "s3cret:with colon"))).unwrap();
        assert_eq!(users.authenticate("alice", "wrong"), None);
        assert_eq!(users.authenticate("bob", "s3cret:with colon"), None);
        let token = users.authenticate("alice", "s3cret:with colon").expect("the right password");
        assert_eq!(users.user(&token).as_deref(), Some("alice"));
        assert_eq!(users.user("not-a-token"), None);
    }

    #[test]
    fn a_bad_line_is_named_without_its_content() {
        for bad in ["alice", "alice:md5:1:00:00", "alice:pbkdf2-sha256:0:00:00", "alice:pbkdf2-sha256:1:zz:00"] {
            let e = file(bad).unwrap_err();
            assert!(e.contains("line 1: not NAME:pbkdf2-sha256"), "{e}");
        }
        let line = Users::hash_line("alice", "pw");
        let e = file(&format!("{line}\n{line}\n")).unwrap_err();
        assert!(e.contains("line 2: user \"alice\" is listed twice") && !e.contains(&line), "{e}");
    }
}
