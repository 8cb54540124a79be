//! `report.html`: one self-contained page per run or comparison, the page attached to a design review.
//!
//! Invariants: the page loads nothing (no script, no stylesheet or image by URL: tables and inline SVG
//! only, styles in the page), and it is a function of the summaries and plots alone, so the same seed
//! gives the same bytes.

use std::fmt::Write;

use crate::metrics::summary::{Dist, Group, Summary};

/// Escapes text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;max-width:1200px;background:#fff;color:#111}\
table{border-collapse:collapse;margin:8px 0 20px}th,td{border:1px solid #bbb;padding:4px 8px;text-align:right}\
th{background:#eee}td:first-child,th:first-child{text-align:left}\
figure{margin:12px 0}figure svg{display:block;width:860px;height:480px;border:1px solid #ddd}\
.note{color:#444;font-style:italic}";

/// An HTML table: header cells and rows of cells (already text; escaped here).
fn table(o: &mut String, head: &[&str], rows: &[Vec<String>]) {
    o.push_str("<table><tr>");
    for h in head {
        let _ = write!(o, "<th>{}</th>", escape(h));
    }
    o.push_str("</tr>\n");
    for r in rows {
        o.push_str("<tr>");
        for c in r {
            let _ = write!(o, "<td>{}</td>", escape(c));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
}

fn num(v: f64) -> String {
    format!("{v:.2}")
}

fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

fn opt(v: Option<f64>) -> String {
    v.map_or("–".into(), num)
}

fn dist_cells(d: &Dist) -> Vec<String> {
    if d.count == 0 {
        return vec![
            d.count.to_string(),
            "–".into(),
            "–".into(),
            "–".into(),
            "–".into(),
        ];
    }
    vec![
        d.count.to_string(),
        num(d.mean),
        num(d.p50),
        num(d.p95),
        num(d.p99),
    ]
}

/// The headline row of one run.
fn headline(s: &Summary) -> Vec<String> {
    let r = &s.requests;
    vec![
        s.policy.clone(),
        r.arrived.to_string(),
        r.completed.to_string(),
        (r.failed + r.rejected).to_string(),
        if s.ttft_ms.count > 0 {
            num(s.ttft_ms.p50)
        } else {
            "–".into()
        },
        if s.ttft_ms.count > 0 {
            num(s.ttft_ms.p95)
        } else {
            "–".into()
        },
        if s.tpot_ms.count > 0 {
            num(s.tpot_ms.p95)
        } else {
            "–".into()
        },
        num(s.throughput.output_tokens_per_s),
        pct(s.goodput.fraction),
        pct(s.prefix_cache.hit_rate),
        s.recompute.tokens.to_string(),
    ]
}

const HEADLINE: [&str; 11] = [
    "policy",
    "arrived",
    "completed",
    "failed + rejected",
    "TTFT p50 (ms)",
    "TTFT p95 (ms)",
    "TPOT p95 (ms)",
    "output tokens/s",
    "goodput",
    "prefix hit rate",
    "recomputed tokens",
];

fn groups(o: &mut String, title: &str, what: &str, gs: &[Group]) {
    let _ = writeln!(o, "<h2>{}</h2>", escape(title));
    let rows: Vec<Vec<String>> = gs
        .iter()
        .map(|g| {
            let mut r = vec![g.group.clone()];
            r.extend(dist_cells(&g.dist));
            r
        })
        .collect();
    table(
        o,
        &[
            what,
            "requests",
            "mean (ms)",
            "p50 (ms)",
            "p95 (ms)",
            "p99 (ms)",
        ],
        &rows,
    );
}

fn figures(o: &mut String, plots: &[(String, Vec<u8>)]) {
    for (name, svg) in plots {
        let _ = writeln!(
            o,
            "<figure id=\"{}\">",
            escape(name.trim_end_matches(".svg"))
        );
        o.push_str(&String::from_utf8_lossy(svg));
        let _ = writeln!(o, "<figcaption>{}</figcaption></figure>", escape(name));
    }
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"color-scheme\" content=\"light\"><title>{}</title><style>{STYLE}</style></head>\n\
         <body>\n{body}</body></html>\n",
        escape(title)
    )
}

/// The page of one run: its summary's tables and its plots (file name, SVG).
pub fn run_page(s: &Summary, plots: &[(String, Vec<u8>)]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<h1>fleetsim: {} / {}</h1>\n<p>seed {}, {} s simulated, {} events, fleetsim {}</p>",
        escape(&s.scenario),
        escape(&s.policy),
        s.seed,
        num(s.sim.simulated_s),
        s.sim.events,
        env!("CARGO_PKG_VERSION")
    );
    if let Some(meta) = &s.meta {
        o.push_str("<h2>What this scenario decides</h2>\n<dl>\n");
        for (k, v) in meta.lines() {
            let _ = writeln!(o, "<dt>{k}</dt><dd>{}</dd>", escape(&v));
        }
        o.push_str("</dl>\n");
    }
    if let Some(iv) = &s.replications {
        let _ = writeln!(
            o,
            "<h2>Over {} replications ({:.0}% confidence intervals)</h2>\n<p>Each replication is an independent run (seeds {}); the rest of this page is the first replication's.</p>",
            iv.n,
            iv.level * 100.0,
            iv.seeds
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        let rows: Vec<Vec<String>> = crate::metrics::headline::METRICS
            .iter()
            .filter_map(|(k, _)| {
                let e = iv.metrics.get(*k)?;
                (e.n > 0).then(|| {
                    let d = if e.mean.abs() >= 100.0 { 1 } else { 3 };
                    vec![k.to_string(), e.text(d), e.n.to_string()]
                })
            })
            .collect();
        table(&mut o, &["metric", "mean ± half-width", "n"], &rows);
    }
    o.push_str("<h2>Headline</h2>\n");
    table(&mut o, &HEADLINE, &[headline(s)]);
    if let Some(w) = &s.warmup {
        let _ = writeln!(o, "<p class=\"warmup\">Warm-up: {}.</p>", escape(&w.line()));
    }

    o.push_str("<h2>Where the time goes (completed requests)</h2>\n");
    let rows: Vec<Vec<String>> = s
        .phases_ms
        .iter()
        .map(|p| {
            let mut r = vec![p.phase.clone(), p.span.clone()];
            r.extend(dist_cells(&p.dist));
            r
        })
        .collect();
    table(
        &mut o,
        &[
            "phase",
            "span",
            "requests",
            "mean (ms)",
            "p50 (ms)",
            "p95 (ms)",
            "p99 (ms)",
        ],
        &rows,
    );
    groups(
        &mut o,
        "TTFT by conversation turn",
        "turn",
        &s.ttft_by_turn_ms,
    );
    groups(
        &mut o,
        "TTFT by prompt length",
        "prompt tokens",
        &s.ttft_by_prompt_ms,
    );

    o.push_str("<h2>Recompute by cause</h2>\n");
    let c = &s.recompute.by_cause;
    let causes = c.named();
    let rows: Vec<Vec<String>> = causes
        .iter()
        .map(|(n, cc)| vec![n.to_string(), cc.tokens.to_string(), num(cc.gpu_seconds)])
        .collect();
    table(&mut o, &["cause", "tokens", "GPU seconds"], &rows);

    if !s.recovery.is_empty() {
        o.push_str("<h2>Recovery after faults</h2>\n");
        let (header, rows) = crate::metrics::recovery::table(&s.recovery);
        table(&mut o, &header, &rows);
    }

    if let Some(e) = &s.energy {
        o.push_str("<h2>Energy</h2>\n");
        table(
            &mut o,
            &[
                "GPUs",
                "energy (kJ)",
                "fleet average power (W)",
                "per completed request (J)",
                "per output token (J)",
            ],
            &[vec![
                e.gpus.to_string(),
                num(e.joules / 1e3),
                num(e.fleet_average_power_w),
                opt(e.per_completed_request_j),
                e.per_output_token_j
                    .map_or("–".into(), |v| format!("{v:.3}")),
            ]],
        );
        o.push_str(if e.validated {
            "<p class=\"note\">Power model: idle power between steps, busy power growing with each step's \
             roofline utilisation, capped at TDP; fitted to Splitwise's A100 measurements.</p>\n"
        } else {
            "<p class=\"note\">Power model: idle power between steps, busy power growing with each step's \
             roofline utilisation, capped at TDP; fitted to Splitwise's A100 measurements and not \
             validated on the other GPUs of this fleet.</p>\n"
        });
    }

    o.push_str("<h2>Workers</h2>\n");
    let rows: Vec<Vec<String>> = s
        .workers
        .iter()
        .map(|w| {
            vec![
                w.id.to_string(),
                format!("{} ×{} {}", w.gpu, w.tp, w.precision),
                w.model.clone(),
                w.requests.to_string(),
                pct(w.share),
                pct(w.step_time_fraction),
                w.mfu.map_or("–".into(), pct),
                pct(w.kv_peak_fraction),
                w.preemptions.to_string(),
                w.evictions.to_string(),
                num(w.energy_j / 1e3),
                if w.calibrated {
                    "calibrated".into()
                } else {
                    "not calibrated".into()
                },
            ]
        })
        .collect();
    table(
        &mut o,
        &[
            "worker",
            "hardware",
            "model",
            "requests",
            "share",
            "time in steps",
            "MFU",
            "KV peak",
            "preemptions",
            "evictions",
            "energy (kJ)",
            "profile",
        ],
        &rows,
    );

    o.push_str("<h2>Plots</h2>\n");
    figures(&mut o, plots);
    page(&format!("fleetsim: {} / {}", s.scenario, s.policy), &o)
}

/// The page of a comparison: one headline row per variant (linking to its own page when `links` gives
/// each variant's folder), then the comparison's plots.
pub fn comparison_page(
    title: &str,
    runs: &[(&Summary, Option<String>)],
    plots: &[(String, Vec<u8>)],
) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "<h1>fleetsim comparison: {}</h1>", escape(title));
    o.push_str("<h2>Headline</h2>\n");
    let mut head = vec!["run"];
    head.extend(HEADLINE);
    o.push_str("<table><tr>");
    for h in &head {
        let _ = write!(o, "<th>{}</th>", escape(h));
    }
    o.push_str("</tr>\n");
    for (s, folder) in runs {
        o.push_str("<tr>");
        let label = folder.clone().unwrap_or_else(|| s.policy.clone());
        match folder {
            Some(f) => {
                let _ = write!(
                    o,
                    "<td><a href=\"{}/report.html\">{}</a></td>",
                    escape(f),
                    escape(&label)
                );
            }
            None => {
                let _ = write!(o, "<td>{}</td>", escape(&label));
            }
        }
        for c in headline(s) {
            let _ = write!(o, "<td>{}</td>", escape(&c));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
    o.push_str("<p class=\"note\">Each run's own page has its phases, breakdowns, workers and plots.</p>\n");
    o.push_str("<h2>Plots</h2>\n");
    figures(&mut o, plots);
    page(&format!("fleetsim comparison: {title}"), &o)
}
