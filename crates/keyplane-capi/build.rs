//! Regenerates `include/keyplane.h` with cbindgen whenever the API changes.
//! The generated header is committed; this keeps it in sync.

fn main() {
    println!("cargo:rerun-if-changed=src/lib.rs");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let config = match cbindgen::Config::from_file(format!("{dir}/cbindgen.toml")) {
        Ok(c) => c,
        Err(e) => {
            println!("cargo:warning=cbindgen.toml: {e}");
            return;
        }
    };
    match cbindgen::Builder::new().with_crate(&dir).with_config(config).generate() {
        Ok(b) => {
            let path = format!("{dir}/include/keyplane.h");
            let mut new = Vec::new();
            b.write(&mut new);
            if std::fs::read(&path).ok().as_deref() != Some(&new[..]) {
                let _ = std::fs::create_dir_all(format!("{dir}/include"));
                if let Err(e) = std::fs::write(&path, &new) {
                    println!("cargo:warning=cannot write {path}: {e}");
                }
            }
        }
        Err(e) => println!("cargo:warning=cbindgen could not generate the header: {e}"),
    }
}
