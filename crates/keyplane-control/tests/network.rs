//! Network-wide FIB: one shared-skeleton table over a 4-switch ring; each
//! switch's view answers its shortest-path port for every host; a link
//! failure updates exactly the switches whose next hops changed.

mod common;

use common::TestServer;
use keyplane_control::client::{self, modify};
use keyplane_control::follow::{Follower, Subscriber};
use keyplane_control::keys::text_key;
use keyplane_control::pb;
use keyplane_control::table::Retain;
use keyplane_control::topology::attach;

const TOPO: &str = "\
switch s1 s2 s3 s4
link s1:1 s2:1
link s2:2 s3:1
link s3:2 s4:1
link s4:2 s1:2
host 10.0.0.1 s1:10
host 10.0.0.2 s2:10
host 10.0.0.3 s3:10
host 10.0.0.4 s4:10
";

fn hosts() -> Vec<[u8; 4]> {
    (1..=4).map(|i| [10, 0, 0, i]).collect()
}

async fn check(fs: &[Follower], want: [[u64; 4]; 4], what: &str) {
    for (s, f) in fs.iter().enumerate() {
        let t = f.handle().current().unwrap();
        let got: Vec<u64> = hosts().iter().map(|h| t.get(h).unwrap()).collect();
        assert_eq!(got, want[s], "{what}: switch s{} ports toward h1..h4", s + 1);
    }
}

async fn run(structure: &str) {
    let srv = TestServer::start(Retain::default()).await;
    let mut c = client::connect(&srv.url).await.unwrap();
    let info = c
        .create_table(pb::CreateTableRequest {
            name: "fib".into(),
            structure: structure.into(),
            value_bits: 20,
            key_format: pb::KeyFormat::Ipv4 as i32,
            topology: TOPO.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.views, ["s1", "s2", "s3", "s4"]);
    assert_eq!(info.n, 4);
    // A network-wide table is followed per switch.
    let e = c.subscribe(pb::SubscribeRequest { table: "fib".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition);
    let mut fs: Vec<Follower> =
        (1..=4).map(|i| Follower::new(Subscriber::new(&srv.url, "fib").view(&format!("s{i}")))).collect();
    for f in &mut fs {
        f.wait_for(0).await.unwrap();
    }
    // Ring, ties to the lower port.
    check(&fs, [[10, 1, 1, 2], [1, 10, 2, 1], [1, 1, 10, 2], [2, 1, 1, 10]], "all links up").await;
    let seq0: Vec<u64> = fs.iter().map(|f| f.subscriber().applied_sequence()).collect();
    // Fail s1-s2: s1, s2 and s3 change next hops; s4 does not.
    let r = c
        .set_link(pb::SetLinkRequest { table: "fib".into(), a: "s1:1".into(), b: "s2:1".into(), up: false })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.sequence, 1);
    for f in &mut fs[..3] {
        f.wait_for(1).await.unwrap();
    }
    check(&fs, [[10, 2, 2, 2], [2, 10, 2, 2], [2, 1, 10, 2], [2, 1, 1, 10]], "s1-s2 down").await;
    // Move h2 from s2:10 to s4:11 (a MODIFY of its attachment): s2, s3 and
    // s4 change their port toward h2; s1 already sent it out of port 2.
    let r = c
        .write(pb::WriteRequest { table: "fib".into(), updates: vec![modify(text_key("10.0.0.2"), attach(3, 11))] })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.sequence, 2);
    // s4 got nothing for the link failure: its next update is the move,
    // built on the blob it had at the start.
    fs[3].step().await.unwrap();
    assert_eq!(fs[3].subscriber().applied_sequence(), 2);
    assert_eq!(seq0[3], 0);
    for f in &mut fs[1..] {
        f.wait_for(2).await.unwrap();
    }
    assert_eq!(fs[0].subscriber().applied_sequence(), 1, "s1 saw no change for the move");
    check(&fs, [[10, 2, 2, 2], [2, 2, 2, 2], [2, 2, 10, 2], [2, 11, 1, 10]], "h2 moved to s4:11").await;
    // Link back up: back to the ring routes (h2 now at s4); s4's ports do not change.
    c.set_link(pb::SetLinkRequest { table: "fib".into(), a: "s2:1".into(), b: "s1:1".into(), up: true }).await.unwrap();
    for f in &mut fs[..3] {
        f.wait_for(3).await.unwrap();
    }
    check(&fs, [[10, 2, 1, 2], [1, 1, 2, 1], [1, 2, 10, 2], [2, 11, 1, 10]], "link restored").await;
    assert_eq!(fs[3].subscriber().applied_sequence(), 2);
    // Bad attachment values are refused.
    let e = c
        .write(pb::WriteRequest { table: "fib".into(), updates: vec![modify(text_key("10.0.0.2"), attach(9, 1))] })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    drop(fs);
    drop(srv.stop().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_wide_othello() {
    run("othello").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_wide_cfw() {
    run("cfw").await;
}
