//! Instruction counts of the service's write path per update, for
//! callgrind: starts the service in-process (embedded store in a temporary
//! directory), creates a table pre-sized for KEYS + 300 000 keys (BATCHES ≤ 300), preloads
//! KEYS keys in batches of 10 000, then writes BATCHES batches of 1000
//! fresh keys through gRPC, one at a time, each waiting for its
//! acknowledgement. Run it twice with two batch counts and take the
//! difference of the writer and commit threads' instruction counts divided
//! by the extra updates (this cancels start-up and preload):
//!
//! ```text
//! cargo build --release -p keyplane-control --example write_cost
//! for b in 20 60; do valgrind --tool=callgrind --callgrind-out-file=/tmp/wc.$b \
//!   --toggle-collect='*service::writer*' --toggle-collect='*service::commit_stage*' \
//!   target/release/examples/write_cost 200000 $b ludo; done
//! callgrind_annotate /tmp/wc.20 | head; callgrind_annotate /tmp/wc.60 | head
//! ```
//!
//! `write_cost [KEYS] [BATCHES] [STRUCTURE]` (defaults 200000, 20, ludo).

use keyplane_control::client::{self, insert};
use keyplane_control::keys::raw_key;
use keyplane_control::pb;
use keyplane_control::server::{ServeConfig, StoreConfig, start};
use keyplane_control::table::Retain;

fn k(i: u64) -> Vec<u8> {
    i.to_le_bytes().to_vec()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let keys: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let batches: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let structure = args.get(3).cloned().unwrap_or_else(|| "ludo".into());
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = ServeConfig {
        listen: "127.0.0.1:0".parse().expect("address"),
        store: StoreConfig::Dir(dir.path().to_path_buf()),
        metrics: None,
        tls: None,
        retain: Retain::default(),
    };
    let srv = start(cfg).await.expect("service starts");
    let mut c = client::connect(&format!("http://{}", srv.addr)).await.expect("connects");
    // Fixed headroom (not BATCHES-dependent, so two runs build the same form).
    let expected = keys + 300_000;
    c.create_table(pb::CreateTableRequest {
        name: "t".into(),
        structure: structure.clone(),
        value_bits: 8,
        options: [(keyplane_control::table::EXPECTED_KEYS.to_string(), expected.to_string())].into(),
        ..Default::default()
    })
    .await
    .expect("creates the table");
    let mut next = 0u64;
    while next < keys {
        let n = (keys - next).min(10_000);
        let ups = (next..next + n).map(|i| insert(raw_key(k(i)), i & 0xff)).collect();
        c.write(pb::WriteRequest { table: "t".into(), updates: ups }).await.expect("preload write");
        next += n;
    }
    for _ in 0..batches {
        let ups = (next..next + 1000).map(|i| insert(raw_key(k(i)), i & 0xff)).collect();
        c.write(pb::WriteRequest { table: "t".into(), updates: ups }).await.expect("write");
        next += 1000;
    }
    println!("{structure}: {keys} preloaded, {batches} batches of 1000, {next} updates in all");
    // Exit without tearing the service down, so that the table's drop is
    // not counted in the writer thread.
    drop(dir);
    std::process::exit(0);
}
