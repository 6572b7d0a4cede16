//! Compiles the XDP programs with clang when clang is there (`clang -O2 -g
//! -target bpf -mcpu=v3`: fetching atomics): the LB's (`bpf/lb_xdp.c` into
//! `$OUT_DIR/lb_xdp.o`, `cfg(kp_xdp_obj)`) and the pps benchmark's generator
//! (`bpf/gen_xdp.c` into `$OUT_DIR/gen_xdp.o`, `cfg(kp_gen_obj)`), so the
//! crate embeds them. Without clang the crate builds all the same and `--io
//! xdp` says how to get the program (install clang, llvm and libbpf-dev,
//! rebuild). `KEYPLANE_LB_NO_XDP=1` skips both programs.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rustc-check-cfg=cfg(kp_xdp_obj)");
    println!("cargo:rustc-check-cfg=cfg(kp_gen_obj)");
    println!("cargo:rerun-if-changed=bpf/lb_xdp.c");
    println!("cargo:rerun-if-changed=bpf/gen_xdp.c");
    println!("cargo:rerun-if-env-changed=KEYPLANE_LB_NO_XDP");
    println!("cargo:rerun-if-env-changed=CLANG");
    if std::env::var_os("KEYPLANE_LB_NO_XDP").is_some_and(|v| v == "1") {
        return;
    }
    // <asm/types.h> lives under the multiarch include directory on Debian/Ubuntu.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let inc = format!("-I/usr/include/{arch}-linux-gnu");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    for (src, obj, cfg, what) in [
        ("bpf/lb_xdp.c", "lb_xdp.o", "kp_xdp_obj", "`keyplane lb --io xdp`"),
        ("bpf/gen_xdp.c", "gen_xdp.o", "kp_gen_obj", "the benchmark's XDP generator"),
    ] {
        let out = out_dir.join(obj);
        let r = Command::new(&clang)
            .args(["-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall", "-Werror", &inc, "-c", src, "-o"])
            .arg(&out)
            .output();
        match r {
            Ok(o) if o.status.success() => println!("cargo:rustc-cfg={cfg}"),
            Ok(o) => println!(
                "cargo:warning={src} did not compile ({clang}): {what} will be unavailable: {}",
                String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or("")
            ),
            Err(e) => println!(
                "cargo:warning=no {clang} ({e}): {what} will be unavailable (install clang, llvm and libbpf-dev)"
            ),
        }
    }
}
