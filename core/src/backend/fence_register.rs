//! The stored form of a fence register on the backends that keep it as one value (etcd, ZooKeeper): the highest
//! accepted token as 8 big-endian bytes, then the value.

use crate::error::{Error, Result};

/// The bytes of a register holding `value` at `token`.
pub(crate) fn encode_register(token: u64, value: &[u8]) -> Vec<u8> {
    [&token.to_be_bytes()[..], value].concat()
}

/// The token and value of a stored register; `what` names the record for the error if it is too short.
pub(crate) fn decode_register(what: &str, stored: &[u8]) -> Result<(u64, Vec<u8>)> {
    let Some((token, value)) = stored.split_first_chunk::<8>() else {
        return Err(Error::internal(format!("{what}: {} bytes, shorter than its 8-byte token", stored.len())));
    };
    Ok((u64::from_be_bytes(*token), value.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn registers_round_trip() {
        let data = encode_register(0x0102_0304_0506_0708, b"v");
        assert_eq!(data, [1, 2, 3, 4, 5, 6, 7, 8, b'v']);
        assert_eq!(decode_register("/f", &data).unwrap(), (0x0102_0304_0506_0708, b"v".to_vec()));
        assert_eq!(decode_register("/f", &encode_register(7, b"")).unwrap(), (7, Vec::new()));
        let err = decode_register("fence node /f", b"short").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Internal);
        assert!(err.message().contains("fence node /f: 5 bytes"), "{err}");
    }
}
