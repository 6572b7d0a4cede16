//! Key formats on the wire: raw-key checks, text parsing and rendering.

use crate::pb;
use keyplane_any::KeyFormat;

/// Longest key the service accepts (bytes).
pub const MAX_KEY_LEN: usize = 4096;

/// The library key format of a protocol enum value (unknown values: `None`).
pub fn from_pb(v: i32) -> Option<KeyFormat> {
    Some(match pb::KeyFormat::try_from(v).ok()? {
        pb::KeyFormat::Text => KeyFormat::Text,
        pb::KeyFormat::Hex => KeyFormat::Hex,
        pb::KeyFormat::U64 => KeyFormat::U64,
        pb::KeyFormat::Ipv4 => KeyFormat::Ipv4,
        pb::KeyFormat::Ipv6 => KeyFormat::Ipv6,
        pb::KeyFormat::Mac => KeyFormat::Mac,
        pb::KeyFormat::Name => KeyFormat::Name,
        pb::KeyFormat::Fivetuple => KeyFormat::FiveTuple,
    })
}

/// The protocol enum value of a library key format.
pub fn to_pb(f: KeyFormat) -> pb::KeyFormat {
    match f {
        KeyFormat::Text => pb::KeyFormat::Text,
        KeyFormat::Hex => pb::KeyFormat::Hex,
        KeyFormat::U64 => pb::KeyFormat::U64,
        KeyFormat::Ipv4 => pb::KeyFormat::Ipv4,
        KeyFormat::Ipv6 => pb::KeyFormat::Ipv6,
        KeyFormat::Mac => pb::KeyFormat::Mac,
        KeyFormat::Name => pb::KeyFormat::Name,
        KeyFormat::FiveTuple => pb::KeyFormat::Fivetuple,
    }
}

fn fixed_len(f: KeyFormat) -> Option<usize> {
    match f {
        KeyFormat::U64 => Some(8),
        KeyFormat::Ipv4 => Some(4),
        KeyFormat::Ipv6 => Some(16),
        KeyFormat::Mac => Some(6),
        _ => None,
    }
}

/// The raw bytes of a protocol key, checked against the table's format.
pub fn resolve(f: KeyFormat, key: Option<&pb::Key>) -> Result<Vec<u8>, String> {
    let raw = match key.and_then(|k| k.key.as_ref()) {
        None => return Err("entry has no key".into()),
        Some(pb::key::Key::Raw(b)) => {
            if let Some(n) = fixed_len(f) {
                if b.len() != n {
                    return Err(format!("{} key must be {n} bytes, got {}", f.name(), b.len()));
                }
            }
            b.clone()
        }
        Some(pb::key::Key::Text(s)) => keyplane_any::parse_key(f, s)?,
    };
    if raw.is_empty() {
        return Err("empty key".into());
    }
    if raw.len() > MAX_KEY_LEN {
        return Err(format!("key of {} bytes is longer than {MAX_KEY_LEN}", raw.len()));
    }
    Ok(raw)
}

/// [`resolve`] taking the key by value (raw bytes move, no copy).
pub fn resolve_owned(f: KeyFormat, key: Option<pb::Key>) -> Result<Vec<u8>, String> {
    match key.and_then(|k| k.key) {
        Some(pb::key::Key::Raw(b)) => {
            if let Some(n) = fixed_len(f) {
                if b.len() != n {
                    return Err(format!("{} key must be {n} bytes, got {}", f.name(), b.len()));
                }
            }
            if b.is_empty() {
                return Err("empty key".into());
            }
            if b.len() > MAX_KEY_LEN {
                return Err(format!("key of {} bytes is longer than {MAX_KEY_LEN}", b.len()));
            }
            Ok(b)
        }
        other => resolve(f, Some(&pb::Key { key: other })),
    }
}

/// A raw key as text in format `f` (what `keyplane ctl read` prints). Keys
/// that do not fit the format print as `0x` + hex.
pub fn render(f: KeyFormat, raw: &[u8]) -> String {
    let hex = || format!("0x{}", raw.iter().map(|b| format!("{b:02x}")).collect::<String>());
    match (f, raw.len()) {
        (KeyFormat::U64, 8) => {
            let mut b = [0u8; 8];
            b.copy_from_slice(raw);
            u64::from_le_bytes(b).to_string()
        }
        (KeyFormat::Ipv4, 4) => std::net::Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]).to_string(),
        (KeyFormat::Ipv6, 16) => {
            let mut b = [0u8; 16];
            b.copy_from_slice(raw);
            std::net::Ipv6Addr::from(b).to_string()
        }
        (KeyFormat::Mac, 6) => raw.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":"),
        (KeyFormat::Hex, _) => hex()[2..].to_string(),
        (KeyFormat::Text | KeyFormat::Name, _) => match std::str::from_utf8(raw) {
            Ok(s) if !s.chars().any(|c| c.is_control()) => s.to_string(),
            _ => hex(),
        },
        _ => hex(),
    }
}

/// A protocol key holding raw bytes.
pub fn raw_key(raw: Vec<u8>) -> pb::Key {
    pb::Key { key: Some(pb::key::Key::Raw(raw)) }
}

/// A protocol key holding text (parsed by the service with the table's format).
pub fn text_key(s: &str) -> pb::Key {
    pb::Key { key: Some(pb::key::Key::Text(s.to_string())) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_and_render_round_trip() {
        for (f, text) in [
            (KeyFormat::Ipv4, "10.1.2.3"),
            (KeyFormat::U64, "12345"),
            (KeyFormat::Mac, "00:11:22:33:44:55"),
            (KeyFormat::Ipv6, "fd00::1"),
            (KeyFormat::Text, "host-a"),
            (KeyFormat::Hex, "0a0b"),
        ] {
            let raw = resolve(f, Some(&text_key(text))).unwrap();
            assert_eq!(render(f, &raw), text, "{f:?}");
            assert_eq!(resolve(f, Some(&raw_key(raw.clone()))).unwrap(), raw);
            assert_eq!(resolve_owned(f, Some(raw_key(raw.clone()))).unwrap(), raw);
            assert_eq!(resolve_owned(f, Some(text_key(text))).unwrap(), raw);
        }
        assert!(resolve(KeyFormat::Ipv4, Some(&raw_key(vec![1, 2, 3]))).is_err());
        assert!(resolve(KeyFormat::Ipv4, Some(&text_key("10.0.0"))).is_err());
        assert!(resolve(KeyFormat::Text, None).is_err());
        assert!(resolve_owned(KeyFormat::Ipv4, Some(raw_key(vec![1, 2, 3]))).is_err());
        assert!(resolve_owned(KeyFormat::Text, Some(raw_key(Vec::new()))).is_err());
        assert!(resolve_owned(KeyFormat::Text, None).is_err());
        assert!(resolve(KeyFormat::Text, Some(&raw_key(Vec::new()))).is_err());
        assert_eq!(render(KeyFormat::Text, &[0, 1]), "0x0001");
    }
}
