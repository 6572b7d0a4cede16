//! PNG copies of the SVG figures, rendered with `resvg` (system fonts,
//! loaded once). Without any font installed the text is left out but the
//! PNG is still written.

use resvg::{tiny_skia, usvg};
use std::sync::{Arc, OnceLock};

fn fonts() -> Arc<usvg::fontdb::Database> {
    static DB: OnceLock<Arc<usvg::fontdb::Database>> = OnceLock::new();
    DB.get_or_init(|| {
        let mut db = usvg::fontdb::Database::new();
        db.load_system_fonts();
        Arc::new(db)
    })
    .clone()
}

/// Renders `svg` into a PNG file at `path`.
pub fn write(svg: &str, path: &str) -> Result<(), String> {
    let opt = usvg::Options { fontdb: fonts(), ..usvg::Options::default() };
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| format!("SVG not readable: {e}"))?;
    let size = tree.size().to_int_size();
    let mut pix = tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("empty image")?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pix.as_mut());
    pix.save_png(path).map_err(|e| e.to_string())
}
