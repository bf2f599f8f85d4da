//! `-graph file=F.html title=T revision=R`: a self-contained HTML page with
//! throughput and latency percentiles over time; each run is a revision, and
//! runs written to the same file are overlaid.

use crate::Interval;
use serde_json::{json, Value};

const BEGIN: &str = "<script id=\"stress-data\" type=\"application/json\">";
const END: &str = "</script><!--end-stress-data-->";

fn existing(path: &str) -> Option<Value> {
    let html = std::fs::read_to_string(path).ok()?;
    let start = html.find(BEGIN)? + BEGIN.len();
    let end = html[start..].find(END)? + start;
    serde_json::from_str(&html[start..end]).ok()
}

/// Adds this run to the graph file (replacing a revision of the same name).
pub fn write(
    path: &str,
    title: Option<&str>,
    revision: Option<&str>,
    command: &str,
    intervals: &[Interval],
    summary: &[String],
) -> std::io::Result<()> {
    let mut data = existing(path)
        .unwrap_or_else(|| json!({ "title": title.unwrap_or("sibyl stress"), "revisions": [] }));
    if let Some(t) = title {
        data["title"] = json!(t);
    }
    let rev = revision.map(|r| r.to_string()).unwrap_or_else(|| {
        format!(
            "run {}",
            data["revisions"]
                .as_array()
                .map(|a| a.len() + 1)
                .unwrap_or(1)
        )
    });
    if let Some(revs) = data["revisions"].as_array_mut() {
        revs.retain(|r| r["revision"] != json!(rev));
        revs.push(json!({ "revision": rev, "command": command, "intervals": intervals, "summary": summary }));
    }
    // no '<' at all inside the script element: `</script>` or `<!--` in a
    // revision name cannot end it or change how it is parsed
    let payload = serde_json::to_string(&data)
        .unwrap_or_default()
        .replace('<', "\\u003c");
    let html = format!(
        r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
canvas {{ border: 1px solid #ccc; margin: 0.5em 0; }}
.legend span {{ display: inline-block; margin-right: 1.5em; }}
pre {{ background: #f6f6f6; padding: 0.5em; font-size: 12px; }}
</style></head>
<body>
<h1 id="title"></h1>
<label>metric <select id="metric">
<option value="ops_per_s">throughput (op/s)</option>
<option value="mean_ms">latency mean (ms)</option>
<option value="median_ms">latency median (ms)</option>
<option value="p95_ms">latency 95th (ms)</option>
<option value="p99_ms" selected>latency 99th (ms)</option>
<option value="p999_ms">latency 99.9th (ms)</option>
<option value="max_ms">latency max (ms)</option>
</select></label>
<div><canvas id="ops" width="900" height="300"></canvas></div>
<div><canvas id="lat" width="900" height="300"></canvas></div>
<div class="legend" id="legend"></div>
<div id="summaries"></div>
{BEGIN}{payload}{END}
<script>
const data = JSON.parse(document.getElementById('stress-data').textContent);
const colors = ['#1f77b4','#d62728','#2ca02c','#ff7f0e','#9467bd','#8c564b','#e377c2','#17becf'];
document.getElementById('title').textContent = data.title;
function draw(id, key, label) {{
  const c = document.getElementById(id), g = c.getContext('2d');
  g.clearRect(0, 0, c.width, c.height);
  const pad = 50, W = c.width - pad - 10, H = c.height - pad;
  let maxX = 1, maxY = 1e-9;
  data.revisions.forEach(r => r.intervals.forEach(p => {{ maxX = Math.max(maxX, p.time_s); maxY = Math.max(maxY, p[key]); }}));
  g.strokeStyle = '#999'; g.beginPath(); g.moveTo(pad, 10); g.lineTo(pad, 10 + H); g.lineTo(pad + W, 10 + H); g.stroke();
  g.fillStyle = '#222'; g.font = '12px sans-serif';
  g.fillText(label, pad + 5, 22); g.fillText(maxY.toFixed(1), 2, 20); g.fillText('0', 30, 10 + H);
  g.fillText(maxX.toFixed(0) + ' s', pad + W - 30, 10 + H + 20);
  data.revisions.forEach((r, i) => {{
    g.strokeStyle = colors[i % colors.length]; g.beginPath();
    r.intervals.forEach((p, j) => {{
      const x = pad + W * p.time_s / maxX, y = 10 + H - H * p[key] / maxY;
      if (j === 0) g.moveTo(x, y); else g.lineTo(x, y);
    }});
    g.stroke();
  }});
}}
function esc(s) {{
  return String(s).replace(/[&<>"']/g, c => ({{'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}})[c]);
}}
function render() {{
  const m = document.getElementById('metric').value;
  draw('ops', 'ops_per_s', 'throughput (op/s)');
  draw('lat', m, document.getElementById('metric').selectedOptions[0].text);
  // names, commands and summaries are text, never markup
  document.getElementById('legend').innerHTML = data.revisions.map((r, i) =>
    '<span style="color:' + colors[i % colors.length] + '">&#9632; ' + esc(r.revision) + '</span>').join('');
  document.getElementById('summaries').innerHTML = data.revisions.map(r =>
    '<h3>' + esc(r.revision) + '</h3><pre>' + esc(r.command + '\n\n' + r.summary.join('\n')) + '</pre>').join('');
}}
document.getElementById('metric').onchange = render;
render();
</script></body></html>
"#,
        title = html_text(data["title"].as_str().unwrap_or("sibyl stress")),
    );
    std::fs::write(path, html)
}

/// Text for an HTML element's content or attribute.
fn html_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_commands_cannot_inject_markup() {
        let dir = std::env::temp_dir().join(format!("sibyl-graph-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("g.html");
        let path = path.to_str().unwrap();
        let evil = "</script><img src=x onerror=alert(1)><!--";
        write(path, Some(evil), Some(evil), evil, &[], &[evil.to_string()]).unwrap();
        let html = std::fs::read_to_string(path).unwrap();
        assert!(!html.contains("<img"), "raw markup in the page");
        assert_eq!(
            html.matches("</script>").count(),
            2,
            "the data ends its script once"
        );
        assert!(html.contains("function esc(s)"));
        // the revision reads back whole, and a second run is overlaid on it
        write(path, None, Some("two"), "cmd", &[], &[]).unwrap();
        let data = existing(path).unwrap();
        assert_eq!(data["revisions"][0]["revision"], json!(evil));
        assert_eq!(data["revisions"][1]["revision"], json!("two"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
