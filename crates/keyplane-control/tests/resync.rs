//! Subscriber resync: after log compaction (a blob instead of deltas) and
//! after a gap (the subscriber refuses the out-of-order delta, reconnects
//! from its sequence and gets what it missed).

mod common;

use common::TestServer;
use keyplane_control::client::{self, insert};
use keyplane_control::follow::{Event, Follower, Subscriber};
use keyplane_control::keys::raw_key;
use keyplane_control::metrics::SubscriberMetrics;
use keyplane_control::pb::{self, subscribe_response::Update};
use keyplane_control::table::Retain;
use std::sync::{Arc, Mutex};
use tonic::{Request, Response, Status};

async fn first(url: &str, from: u64, epoch: u64) -> Update {
    let mut c = client::connect(url).await.unwrap();
    let req = pb::SubscribeRequest { table: "t".into(), from_sequence: from, epoch, ..Default::default() };
    let mut s = c.subscribe(req).await.unwrap().into_inner();
    s.message().await.unwrap().unwrap().update.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_after_compaction() {
    let srv = TestServer::start(Retain { messages: 10, bytes: 1 << 20 }).await;
    let mut c = client::connect(&srv.url).await.unwrap();
    c.create_table(pb::CreateTableRequest {
        name: "t".into(),
        structure: "othello".into(),
        value_bits: 8,
        ..Default::default()
    })
    .await
    .unwrap();
    let write = |c: &mut client::Client, i: u64| {
        let mut c = c.clone();
        async move {
            c.write(pb::WriteRequest {
                table: "t".into(),
                updates: vec![insert(raw_key(i.to_le_bytes().to_vec()), i % 200)],
            })
            .await
            .unwrap()
            .into_inner()
            .sequence
        }
    };
    for i in 0..5 {
        write(&mut c, i).await;
    }
    let Update::Snapshot(s0) = first(&srv.url, 0, 0).await else { panic!("no state: snapshot first") };
    assert_eq!(s0.sequence, 5);
    let epoch = s0.epoch;
    // Within the log: deltas only, starting right after the subscriber's sequence.
    let Update::Delta(d) = first(&srv.url, 3, epoch).await else { panic!("in the log: a delta") };
    assert_eq!(d.sequence, 4);
    // A follower that stops reading while the log is compacted past it.
    let m = Arc::new(SubscriberMetrics::default());
    let mut f = Follower::new(Subscriber::new(&srv.url, "t").metrics(m.clone()));
    f.wait_for(5).await.unwrap();
    for i in 5..200 {
        write(&mut c, i).await;
    }
    // Older than the log holds (10 messages): the stream starts with a blob.
    let Update::Snapshot(s) = first(&srv.url, 5, epoch).await else { panic!("compacted: a snapshot") };
    assert_eq!(s.sequence, 200);
    let d = c.describe_table(pb::DescribeTableRequest { name: "t".into() }).await.unwrap().into_inner();
    assert_eq!(d.log_first_sequence, 190);
    assert_eq!(d.log_length, 10);
    f.wait_for(200).await.unwrap();
    let t = f.handle().current().unwrap();
    for i in 0..200u64 {
        assert_eq!(t.get(&i.to_le_bytes()), Some(i % 200));
    }
    let Update::Snapshot(fresh) = first(&srv.url, 0, 0).await else { panic!() };
    assert_eq!(t.to_bytes(), fresh.blob, "the resynced follower equals a fresh export");
    drop(f);
    drop(srv.stop().await);
}

/// A fake service that streams a gap on the first subscription and the
/// missing delta on the second; records the requests.
#[derive(Clone, Default)]
struct Gappy {
    reqs: Arc<Mutex<Vec<pb::SubscribeRequest>>>,
}

type Stream<T> = std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl pb::control_server::Control for Gappy {
    async fn create_table(&self, _: Request<pb::CreateTableRequest>) -> Result<Response<pb::TableInfo>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn list_tables(&self, _: Request<pb::ListTablesRequest>) -> Result<Response<pb::ListTablesResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn describe_table(&self, _: Request<pb::DescribeTableRequest>) -> Result<Response<pb::TableInfo>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn drop_table(&self, _: Request<pb::DropTableRequest>) -> Result<Response<pb::DropTableResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn write(&self, _: Request<pb::WriteRequest>) -> Result<Response<pb::WriteResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn set_link(&self, _: Request<pb::SetLinkRequest>) -> Result<Response<pb::WriteResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    type ReadStream = Stream<pb::ReadResponse>;
    async fn read(&self, _: Request<pb::ReadRequest>) -> Result<Response<Self::ReadStream>, Status> {
        Err(Status::unimplemented("fake"))
    }
    type SubscribeStream = Stream<pb::SubscribeResponse>;
    async fn subscribe(&self, req: Request<pb::SubscribeRequest>) -> Result<Response<Self::SubscribeStream>, Status> {
        let n = {
            let mut r = self.reqs.lock().unwrap();
            r.push(req.into_inner());
            r.len()
        };
        let msg = |u| Ok(pb::SubscribeResponse { update: Some(u) });
        let items = if n == 1 {
            vec![
                msg(Update::Snapshot(pb::Snapshot { sequence: 5, epoch: 9, blob: b"blob-5".to_vec() })),
                msg(Update::Delta(pb::Delta { sequence: 7, epoch: 9, delta: b"delta-7".to_vec() })),
            ]
        } else {
            vec![
                msg(Update::Delta(pb::Delta { sequence: 6, epoch: 9, delta: b"delta-6".to_vec() })),
                msg(Update::Delta(pb::Delta { sequence: 7, epoch: 9, delta: b"delta-7".to_vec() })),
            ]
        };
        // Keep the stream open after the items.
        let s = tokio_stream::StreamExt::chain(tokio_stream::iter(items), tokio_stream::pending());
        Ok(Response::new(Box::pin(s)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriber_refuses_a_gap_and_resumes_from_its_sequence() {
    let fake = Gappy::default();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(pb::control_server::ControlServer::new(fake.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(l)),
    );
    let m = Arc::new(SubscriberMetrics::default());
    let mut s = Subscriber::new(&format!("http://{addr}"), "t")
        .metrics(m.clone())
        .backoff(std::time::Duration::from_millis(1), std::time::Duration::from_millis(10));
    let Event::Blob { sequence: 5, epoch: 9, bytes } = s.next().await.unwrap() else { panic!("blob first") };
    assert_eq!(bytes.as_slice(), b"blob-5");
    // Delta 7 after 5 is a gap: refused; the subscriber reconnects from 5.
    let Event::Delta { sequence: 6, bytes, .. } = s.next().await.unwrap() else { panic!("delta 6 after the gap") };
    assert_eq!(bytes, b"delta-6");
    let Event::Delta { sequence: 7, .. } = s.next().await.unwrap() else { panic!("then delta 7") };
    assert_eq!(s.applied_sequence(), 7);
    assert_eq!(m.refused.get(), 1);
    assert_eq!(m.reconnects.get(), 1);
    let reqs = fake.reqs.lock().unwrap().clone();
    assert_eq!(reqs.len(), 2);
    assert_eq!((reqs[0].from_sequence, reqs[0].epoch), (0, 0));
    assert_eq!((reqs[1].from_sequence, reqs[1].epoch), (5, 9), "resumes from what it holds");
    server.abort();
}
