//! The namespace helper: topologies work (ping over veth and a bridge, IPv4 and IPv6) and are
//! removed when the guard drops, also when the test panics; `enter` returns the thread home.

use keyplane_net::testnet::{self, TestNet};
use std::process::Command;

fn netns_list() -> String {
    String::from_utf8(Command::new("ip").args(["netns", "list"]).output().unwrap().stdout).unwrap()
}

fn my_netns() -> u64 {
    std::os::unix::fs::MetadataExt::ino(&std::fs::metadata("/proc/thread-self/ns/net").unwrap())
}

#[test]
fn bridge_topology_pings_and_is_removed() {
    if let Some(why) = testnet::skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
    let names;
    {
        let mut net = TestNet::new("br").unwrap();
        let sw = net.add_ns("sw").unwrap();
        let h1 = net.add_ns("h1").unwrap();
        let h2 = net.add_ns("h2").unwrap();
        net.bridge(&sw, "br0").unwrap();
        for (i, h) in [&h1, &h2].into_iter().enumerate() {
            let port = format!("p{i}");
            net.veth(h, "eth0", &sw, &port).unwrap();
            net.attach(&sw, &port, "br0").unwrap();
            net.addr(h, "eth0", &format!("{}/24", testnet::v4(1, i as u8 + 1))).unwrap();
            net.addr(h, "eth0", &format!("{}/64", testnet::v6(1, i as u16 + 1))).unwrap();
        }
        net.run(&h1, &["ping", "-c", "1", "-W", "5", &testnet::v4(1, 2).to_string()]).unwrap();
        net.run(&h1, &["ping", "-6", "-c", "1", "-W", "5", &testnet::v6(1, 2).to_string()]).unwrap();
        // enter() runs in the namespace and comes back.
        let home = my_netns();
        let inside = net.enter(&h1, my_netns).unwrap();
        assert_ne!(inside, home);
        assert_eq!(my_netns(), home);
        names = net.namespaces().to_vec();
        let list = netns_list();
        assert!(names.iter().all(|n| list.contains(n.as_str())));
        let id = net.spawn(&h2, &["sleep", "30"]).unwrap();
        assert!(net.child(id).unwrap().try_wait().unwrap().is_none());
    }
    let list = netns_list();
    assert!(names.iter().all(|n| !list.contains(n.as_str())), "namespaces left behind: {list}");
}

#[test]
fn namespaces_are_removed_when_the_test_panics() {
    if let Some(why) = testnet::skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let r = std::thread::spawn(move || {
        let mut net = TestNet::new("panic").unwrap();
        let a = net.add_ns("a").unwrap();
        let b = net.add_ns("b").unwrap();
        net.veth(&a, "va", &b, "vb").unwrap();
        tx.send(net.namespaces().to_vec()).unwrap();
        // A panic inside enter() must also bring the thread back before the guard drops.
        let _ = net.enter(&a, || panic!("deliberate test failure"));
    })
    .join();
    assert!(r.is_err(), "the thread panicked");
    let names = rx.recv().unwrap();
    assert_eq!(names.len(), 2);
    let list = netns_list();
    assert!(names.iter().all(|n| !list.contains(n.as_str())), "namespaces left behind: {list}");
}

#[test]
fn bad_names_are_refused() {
    assert!(TestNet::new("no spaces").is_err());
    assert!(TestNet::new("waytoolongtagname").is_err());
    let mut net = TestNet::new("x").unwrap();
    assert!(net.add_ns("../etc").is_err());
    assert!(testnet::enter("../x", || ()).is_err());
}
