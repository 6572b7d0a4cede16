//! Compiles the LB's XDP program (`bpf/lb_xdp.c`) with clang when clang is
//! there (`clang -O2 -g -target bpf -mcpu=v3`: fetching atomics), into `$OUT_DIR/lb_xdp.o`, and sets
//! `cfg(kp_xdp_obj)` so the crate embeds it. Without clang the crate builds
//! all the same and `--io xdp` says how to get the program (install clang,
//! llvm and libbpf-dev, rebuild). `KEYPLANE_LB_NO_XDP=1` skips the program.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rustc-check-cfg=cfg(kp_xdp_obj)");
    println!("cargo:rerun-if-changed=bpf/lb_xdp.c");
    println!("cargo:rerun-if-env-changed=KEYPLANE_LB_NO_XDP");
    println!("cargo:rerun-if-env-changed=CLANG");
    if std::env::var_os("KEYPLANE_LB_NO_XDP").is_some_and(|v| v == "1") {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("lb_xdp.o");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // <asm/types.h> lives under the multiarch include directory on Debian/Ubuntu.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let inc = format!("-I/usr/include/{arch}-linux-gnu");
    let r = Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall", "-Werror", &inc, "-c", "bpf/lb_xdp.c", "-o"])
        .arg(&out)
        .output();
    match r {
        Ok(o) if o.status.success() => println!("cargo:rustc-cfg=kp_xdp_obj"),
        Ok(o) => println!(
            "cargo:warning=bpf/lb_xdp.c did not compile ({clang}): `keyplane lb --io xdp` will be unavailable: {}",
            String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or("")
        ),
        Err(e) => println!(
            "cargo:warning=no {clang} ({e}): `keyplane lb --io xdp` will be unavailable (install clang, llvm and libbpf-dev)"
        ),
    }
}
