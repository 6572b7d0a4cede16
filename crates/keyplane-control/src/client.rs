//! Client calls used by `keyplane ctl` (and by tests and benchmarks).

use crate::error::{ControlError, Result};
use crate::pb::{self, control_client::ControlClient};
use tonic::transport::{Channel, Endpoint};

/// A connected client.
pub type Client = ControlClient<Channel>;

/// Normalises `host:port` to `http://host:port`.
pub fn normalize_url(url: &str) -> String {
    if url.contains("://") { url.to_string() } else { format!("http://{url}") }
}

/// Connects to a service (`http://host:port`, or `host:port`).
pub async fn connect(url: &str) -> Result<Client> {
    let url = normalize_url(url);
    let ep = Endpoint::from_shared(url.clone())
        .map_err(|e| ControlError::Connect { url: url.clone(), msg: e.to_string() })?
        .connect_timeout(std::time::Duration::from_secs(5))
        .tcp_nodelay(true);
    let ch = ep.connect().await.map_err(|e| ControlError::Connect { url: url.clone(), msg: e.to_string() })?;
    Ok(ControlClient::new(ch)
        .max_decoding_message_size(crate::server::MAX_MESSAGE)
        .max_encoding_message_size(crate::server::MAX_MESSAGE))
}

/// An INSERT update.
pub fn insert(key: pb::Key, value: u64) -> pb::Update {
    pb::Update { r#type: pb::update::Type::Insert as i32, entry: Some(pb::Entry { key: Some(key), value }) }
}

/// A MODIFY update.
pub fn modify(key: pb::Key, value: u64) -> pb::Update {
    pb::Update { r#type: pb::update::Type::Modify as i32, entry: Some(pb::Entry { key: Some(key), value }) }
}

/// A DELETE update.
pub fn delete(key: pb::Key) -> pb::Update {
    pb::Update { r#type: pb::update::Type::Delete as i32, entry: Some(pb::Entry { key: Some(key), value: 0 }) }
}

/// Reads every entry (or `keys`) of a table: `(raw key, value)` and the sequence.
pub async fn read_all(c: &mut Client, table: &str, keys: Vec<pb::Key>) -> Result<(Vec<(Vec<u8>, u64)>, u64)> {
    let mut s = c.read(pb::ReadRequest { table: table.to_string(), keys }).await?.into_inner();
    let mut out = Vec::new();
    let mut seq = 0;
    while let Some(chunk) = s.message().await? {
        seq = chunk.sequence;
        for e in chunk.entries {
            if let Some(pb::Key { key: Some(pb::key::Key::Raw(k)) }) = e.key {
                out.push((k, e.value));
            }
        }
    }
    Ok((out, seq))
}
