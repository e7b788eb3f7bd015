//! `etcd://`: not built yet.

use std::sync::Arc;

use super::Backend;
use crate::error::{Error, ErrorKind, Result};
use crate::options::ClientOptions;

/// Opens the backend `url` names.
pub(crate) async fn connect(url: &str, _opts: &ClientOptions) -> Result<Arc<dyn Backend>> {
    Err(Error::new(ErrorKind::Unsupported, format!("URL {url:?}: this backend is not built into this version of fencelock")))
}
