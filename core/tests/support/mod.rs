//! Helpers shared by the integration tests: finding the test servers the test command started.
#![allow(dead_code, reason = "each test binary uses a different subset")]

mod services;
#[allow(unused_imports, reason = "each test binary uses a different subset")]
pub use services::{service_url, skipped, unique};

pub mod etcd_raw;
pub mod members;
pub mod redis_tls;
pub mod secured;
pub mod sql;
