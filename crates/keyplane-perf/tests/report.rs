//! The report at `tiny` scale: every figure is drawn, `results.json` is
//! valid, each SVG has 1–8 series, both axis labels and a legend outside the
//! plotting area, and every figure `index.md` names exists.

use keyplane_perf::report::{FIGURES, Options, check_svg, replot, run, select};
use serde_json::Value;

fn tmp(name: &str) -> String {
    let d = std::env::temp_dir().join(format!("keyplane-report-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d.display().to_string()
}

#[test]
fn tiny_report_draws_every_figure_readably() {
    let dir = tmp("tiny");
    let opts = Options { dir: dir.clone(), scale: "tiny".into(), only: vec![], quiet: false, progress: false };
    let summary = run(&opts).expect("report");
    assert!(summary.missing.is_empty(), "figures without a plot: {:?}", summary.missing);
    assert_eq!(summary.figures, FIGURES.len());

    let doc: Value = serde_json::from_slice(&std::fs::read(format!("{dir}/results.json")).unwrap()).unwrap();
    assert_eq!(doc["meta"]["scale"], "tiny");
    let jobs = doc["jobs"].as_array().unwrap();
    let failed: Vec<&Value> = jobs.iter().filter(|j| !j["error"].is_null()).collect();
    assert!(failed.is_empty(), "failed jobs: {failed:?}");
    assert!(doc["records"].as_array().unwrap().len() > 100);
    let figs = doc["figures"].as_array().unwrap();
    assert_eq!(figs.len(), FIGURES.len());

    for f in figs {
        let id = f["id"].as_str().unwrap();
        let file = f["file"].as_str().unwrap_or_else(|| panic!("{id}: no plot"));
        let svg = std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
        let series = check_svg(&svg).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert!((1..=8).contains(&series.len()), "{id}: {series:?}");
        // Every plot carries the machine and the scale in its caption.
        assert!(svg.contains("Machine:") && svg.contains("Scale: tiny"), "{id}: caption");
        // The paper's values stand beside ours, and a verdict is given.
        assert!(!f["rows"].as_array().unwrap().is_empty(), "{id}: no paper-vs-keyplane rows");
        assert!(["Reproduced", "Partly reproduced", "Not reproduced"].contains(&f["verdict"].as_str().unwrap()));
        let png = std::fs::read(format!("{dir}/{id}.png")).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{id}: PNG");
    }

    // Every image index.md links exists, and every figure has its section.
    let idx = std::fs::read_to_string(format!("{dir}/index.md")).unwrap();
    let mut linked = 0;
    for part in idx.split("](").skip(1) {
        let target = part.split(')').next().unwrap();
        if target.ends_with(".svg") || target.ends_with(".json") {
            assert!(std::path::Path::new(&format!("{dir}/{target}")).exists(), "index.md links missing {target}");
            linked += 1;
        }
    }
    assert!(linked > FIGURES.len(), "{linked} links");
    for f in FIGURES {
        assert!(idx.contains(&format!("<a id=\"{}\"></a>", f.id)), "{}: no section", f.id);
    }

    // Redrawing from results.json gives the same figures without running anything.
    let before = std::fs::read_to_string(format!("{dir}/concise-table2.svg")).unwrap();
    std::fs::remove_file(format!("{dir}/concise-table2.svg")).unwrap();
    let again = replot(&dir).unwrap();
    assert_eq!(again.figures, FIGURES.len());
    assert_eq!(std::fs::read_to_string(format!("{dir}/concise-table2.svg")).unwrap(), before);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn only_selects_figures_and_rejects_unknown_names() {
    let ids: Vec<&str> = select(&["concise".into()]).unwrap().iter().map(|f| f.id).collect();
    assert_eq!(ids, ["concise-table2", "concise-fig5", "concise-fig10", "concise-fig11"]);
    assert!(select(&["nosuch".into()]).is_err_and(|e| e.starts_with("--only nosuch: no such figure")));
    let bad = Options { dir: tmp("bad"), scale: "huge".into(), only: vec![], quiet: false, progress: false };
    assert_eq!(run(&bad).unwrap_err(), "--scale huge: expected tiny, small, medium or paper");
}

#[test]
fn the_checker_catches_a_legend_over_the_data() {
    let ok = r#"<svg><rect class="plot-area" x="80" y="40" width="600" height="360"/>
<g class="series" data-name="a"></g><text class="axis-label x">n</text><text class="axis-label y">bits</text>
<rect class="legend-box" x="700" y="40" width="200" height="50"/></svg>"#;
    assert_eq!(check_svg(ok).unwrap(), ["a"]);
    let over = ok.replace(r#"class="legend-box" x="700""#, r#"class="legend-box" x="500""#);
    assert!(check_svg(&over).unwrap_err().contains("overlaps"));
    let unlabelled = ok.replace(">bits<", "><");
    assert!(check_svg(&unlabelled).unwrap_err().contains("y axis label"));
    let nine: String = (0..9).map(|i| format!(r#"<g class="series" data-name="s{i}"></g>"#)).collect();
    assert!(check_svg(&ok.replace(r#"<g class="series" data-name="a"></g>"#, &nine)).unwrap_err().contains("9 series"));
}
