//! The report at `tiny` scale: every figure is drawn, `results.json` is
//! valid, each SVG has 1–8 series, both axis labels and a legend outside the
//! plotting area, and every figure `index.md` names exists.

use keyplane_perf::report::{FIGURES, Options, Scale, check_memory, check_svg, jobs, replot, run, scale_peak, select};
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

    // The figures the issue lists are all there, including the Concury setups
    // (thesis Figs. 5.9–5.11, 5.13–5.16) and the ScaleBricks per-node memory.
    for id in [
        "thesis-fig5.8",
        "thesis-fig5.9",
        "thesis-fig5.10",
        "thesis-fig5.11",
        "thesis-fig5.12",
        "thesis-fig5.13",
        "thesis-fig5.14",
        "thesis-fig5.15",
        "thesis-fig5.16",
        "thesis-fig5.17",
        "thesis-fig5.18",
        "scalebricks-pernode",
        "scalebricks-fig11",
    ] {
        let f = figs.iter().find(|f| f["id"] == id).unwrap_or_else(|| panic!("{id} missing"));
        assert!(f["series"].as_array().unwrap().len() >= 2, "{id}: {:?}", f["series"]);
    }
    // The LB setup jobs measured what their figures plot, sized by the scale.
    let lb: Vec<&Value> = doc["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["job"].as_str().is_some_and(|j| j.starts_with("lb-dipv-large/")))
        .collect();
    assert_eq!(lb.len(), 2 * 3, "2 sizes × 3 designs");
    for r in &lb {
        assert_eq!(r["queries"], 20_000, "tiny scale's lookup count");
        assert!(r["memory_bytes"].as_f64().unwrap() > 0.0 && r["threaded_lookups_per_s_2t"].as_f64().unwrap() > 0.0);
    }
    assert!(lb.iter().filter(|r| r["structure"] == "concury").all(|r| r["queries_misrouted"] == 0));

    // Redrawing from results.json gives the same figures without running anything.
    let before = std::fs::read_to_string(format!("{dir}/concise-table2.svg")).unwrap();
    std::fs::remove_file(format!("{dir}/concise-table2.svg")).unwrap();
    let again = replot(&dir).unwrap();
    assert_eq!(again.figures, FIGURES.len());
    assert_eq!(std::fs::read_to_string(format!("{dir}/concise-table2.svg")).unwrap(), before);

    // `--only` into the same directory reruns only that figure's jobs and keeps
    // every other record and figure.
    let kept_before: Vec<Value> =
        doc["records"].as_array().unwrap().iter().filter(|r| r["job"] == "concise-table2").cloned().collect();
    let only = Options { only: vec!["scalebricks-pernode".into()], ..opts };
    let merged = run(&only).expect("merged report");
    assert_eq!(merged.figures, FIGURES.len());
    let doc2: Value = serde_json::from_slice(&std::fs::read(format!("{dir}/results.json")).unwrap()).unwrap();
    assert_eq!(doc2["figures"].as_array().unwrap().len(), FIGURES.len());
    let kept_after: Vec<Value> =
        doc2["records"].as_array().unwrap().iter().filter(|r| r["job"] == "concise-table2").cloned().collect();
    assert_eq!(kept_before, kept_after);
    let gpt = |d: &Value| d["records"].as_array().unwrap().iter().filter(|r| r["job"] == "setsep-gpt").count();
    assert_eq!((gpt(&doc), gpt(&doc2)), (5, 5), "setsep-gpt replaced, not duplicated");
    assert_eq!(doc2["jobs"].as_array().unwrap().len(), jobs.len());
    assert_eq!(doc2["meta"]["runs"].as_array().unwrap().len(), 2);
    assert!(std::fs::read_to_string(format!("{dir}/index.md")).unwrap().contains("Assembled from 2 runs"));
    // ... but not into a report of another scale.
    let other = Options {
        dir: dir.clone(),
        scale: "small".into(),
        only: vec!["scalebricks-pernode".into()],
        quiet: false,
        progress: false,
    };
    assert!(run(&other).unwrap_err().contains("holds a report at scale `tiny`"));
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

#[test]
fn paper_scale_fits_24_gib_and_refuses_early_without_the_memory() {
    let gib = 1073741824.0;
    let paper = Scale::named("paper").unwrap();
    let all = jobs(&paper);
    let needed: Vec<_> = all.iter().collect();
    // Defined to fit this 24 GiB machine (jobs run one at a time).
    assert!(scale_peak(&paper) <= 20.0 * gib, "paper peak {:.1} GiB", scale_peak(&paper) / gib);
    assert!(check_memory(&paper, &needed, Some(23.0 * gib)).is_ok());
    let e = check_memory(&paper, &needed, Some(4.0 * gib)).unwrap_err();
    assert!(e.starts_with("--scale paper: job `") && e.contains("GiB but only 4.0 GiB"), "{e}");
    // Unknown memory is not a reason to refuse.
    assert!(check_memory(&paper, &needed, None).is_ok());
    // The smaller scales fit in the memory a CI machine has.
    for s in ["tiny", "small", "medium"] {
        assert!(scale_peak(&Scale::named(s).unwrap()) < 4.0 * gib, "{s}");
    }
}
