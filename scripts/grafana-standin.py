#!/usr/bin/env python3
"""Renders scripts/grafana-dashboard.json the way Grafana lays it out, from a real Prometheus:
every panel's queries go to Prometheus's HTTP API (query_range), as Grafana would send them,
and the results are drawn as SVG in one HTML page (24-column grid, Grafana's dark theme).
A stand-in for Grafana, which is packaged neither by Debian nor by PyPI; the screenshot is
taken of this page (scripts/grafana-standin.sh).

    grafana-standin.py DASHBOARD PROMETHEUS_URL START END STEP_SECONDS OUT.html
"""
import html, json, sys, time, urllib.parse, urllib.request

dashboard_path, prometheus, start, end, step, out = sys.argv[1:7]
start, end, step = float(start), float(end), float(step)
dashboard = json.load(open(dashboard_path))
# Grafana's $__rate_interval: four scrape intervals (1 s here), at least the step plus one.
rate_interval = f"{int(max(4, step + 1))}s"
COLOURS = ["#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#b877d9", "#37872d", "#fade2a", "#c4162a", "#8f8f8f"]


def query(expr):
    expr = expr.replace("$__rate_interval", rate_interval)
    url = f"{prometheus}/api/v1/query_range?" + urllib.parse.urlencode(
        {"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(url, timeout=30) as response:
        body = json.load(response)
    if body.get("status") != "success":
        raise SystemExit(f"prometheus refused {expr}: {body}")
    return body["data"]["result"]


def legend(template, labels):
    for key, value in labels.items():
        template = template.replace("{{" + key + "}}", value)
    return template.replace("{{job}}", "").strip()


def number(value, unit):
    if unit == "s":
        return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"
    if unit == "bytes":
        return f"{value / 1024:.1f} KiB" if value >= 1024 else f"{value:.0f} B"
    suffix = "/s" if unit == "ops" else ""
    for scale, name in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.2f}{name}{suffix}"
    return (f"{value:.0f}" if value == int(value) else f"{value:.2f}") + suffix


def series_of(panel):
    found = []
    for target in panel["targets"]:
        for result in query(target["expr"]):
            points = [(float(t), float(v)) for t, v in result["values"] if v not in ("NaN", "+Inf", "-Inf")]
            if points:
                found.append((legend(target.get("legendFormat", ""), result["metric"]), points))
    return found


def timeseries(panel, width, height):
    series, unit = series_of(panel), panel["fieldConfig"]["defaults"].get("unit", "short")
    left, right, top, bottom = 70, 10, 8, 26 + 16 * ((len(series) + 1) // 2)
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max((v for _, points in series for _, v in points), default=0) or 1
    peak *= 1.1
    x = lambda t: left + plot_w * (t - start) / (end - start)
    y = lambda v: top + plot_h * (1 - v / peak)
    parts = []
    for i in range(5):
        value = peak * i / 4
        parts.append(f'<line x1="{left}" y1="{y(value):.1f}" x2="{width - right}" y2="{y(value):.1f}" stroke="#2c3235"/>'
                     f'<text x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{html.escape(number(value, unit))}</text>')
    for i in range(6):
        t = start + (end - start) * i / 5
        parts.append(f'<text x="{x(t):.1f}" y="{top + plot_h + 16}" text-anchor="middle">'
                     f'{time.strftime("%H:%M:%S", time.gmtime(t))}</text>')
    for index, (name, points) in enumerate(series):
        colour = COLOURS[index % len(COLOURS)]
        path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in points)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        lx, ly = left + (index % 2) * plot_w / 2, top + plot_h + 34 + 16 * (index // 2)
        parts.append(f'<rect x="{lx}" y="{ly - 9}" width="14" height="4" fill="{colour}"/>'
                     f'<text x="{lx + 20}" y="{ly - 4}">{html.escape(name)}</text>')
    if not series:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" font-size="14">No data</text>')
    return f'<svg width="{width}" height="{height}">{"".join(parts)}</svg>'


def stat(panel, width, height):
    series = series_of(panel)
    cells = "".join(
        f'<div class="stat"><div class="value">{html.escape(number(points[-1][1], "short"))}</div>'
        f'<div class="name">{html.escape(name)}</div></div>' for name, points in series) or '<div class="stat">No data</div>'
    return f'<div class="stats" style="height:{height}px">{cells}</div>'


column, row = 1600 / 24, 30
blocks = []
for panel in dashboard["panels"]:
    grid = panel["gridPos"]
    width, height = grid["w"] * column - 8, grid["h"] * row - 8
    body = stat(panel, width, height - 30) if panel["type"] == "stat" else timeseries(panel, width - 8, height - 34)
    blocks.append(f'<div class="panel" style="left:{grid["x"] * column + 4}px;top:{grid["y"] * row + 50}px;'
                  f'width:{width}px;height:{height}px"><div class="title">{html.escape(panel["title"])}</div>{body}</div>')
bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"]) * row + 60
page = f"""<!doctype html><html><head><meta charset="utf-8"><style>
body {{ margin: 0; background: #111217; color: #ccccdc; font: 12px Inter, Helvetica, Arial, sans-serif; }}
header {{ height: 40px; line-height: 40px; padding-left: 12px; font-size: 16px; color: #d8d9da; }}
header span {{ font-size: 12px; color: #8e8e8e; margin-left: 16px; }}
.panel {{ position: absolute; background: #181b1f; border: 1px solid #2c3235; border-radius: 2px; overflow: hidden; }}
.title {{ height: 28px; line-height: 28px; padding-left: 8px; font-weight: 500; color: #d8d9da; }}
svg text {{ fill: #8e8e8e; font-size: 11px; }}
.stats {{ display: flex; align-items: center; justify-content: space-around; }}
.stat {{ text-align: center; }} .value {{ font-size: 30px; color: #73bf69; font-weight: 500; }} .name {{ color: #8e8e8e; }}
</style></head><body style="height:{bottom}px"><header>{html.escape(dashboard["title"])}<span>stand-in renderer:
queries from scripts/grafana-dashboard.json run against Prometheus {html.escape(prometheus)},
{time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(start))} to {time.strftime("%H:%M:%S", time.gmtime(end))} UTC,
step {step:.0f} s, $__rate_interval {rate_interval}</span></header>{"".join(blocks)}</body></html>"""
open(out, "w").write(page)
