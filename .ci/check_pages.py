"""Renders report.html pages in headless Chromium and checks them (run by .ci/run).

Usage: check_pages.py CHROMIUM SCREENSHOT_DIR PAGE.html [PAGE.html ...]

For every page, in a light and a dark colour scheme: no console error or page error, no request other
than the page itself (the page must load nothing: no script, stylesheet, image or font by URL), and every
plot's <svg> rendered with a non-zero width and height. A screenshot of each page in each scheme goes to
SCREENSHOT_DIR, to look at. Exits non-zero, naming the page and the problem, on the first failure.
"""

import pathlib
import sys

from playwright.sync_api import sync_playwright


def check(browser, page_path: pathlib.Path, scheme: str, shots: pathlib.Path) -> list[str]:
    url = page_path.resolve().as_uri()
    problems: list[str] = []
    context = browser.new_context(color_scheme=scheme, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.on(
        "console",
        lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on(
        "request",
        lambda r: problems.append(f"fetches {r.url}") if r.url != url else None,
    )
    page.goto(url, wait_until="load")
    sizes = page.evaluate(
        "() => Array.from(document.querySelectorAll('figure svg')).map(s => {"
        " const b = s.getBoundingClientRect(); return [s.closest('figure').id, b.width, b.height]; })"
    )
    if not sizes:
        problems.append("no plot (no <figure><svg>)")
    for fig, w, h in sizes:
        if not (w > 0 and h > 0):
            problems.append(f"plot {fig} renders {w}x{h}")
    name = f"{page_path.parent.name}-{page_path.stem}-{scheme}.png"
    page.screenshot(path=str(shots / name), full_page=True)
    context.close()
    return problems


def main() -> int:
    chromium, shots, pages = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3:]
    shots.mkdir(parents=True, exist_ok=True)
    failed = 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for page_path in map(pathlib.Path, pages):
            for scheme in ("light", "dark"):
                problems = check(browser, page_path, scheme, shots)
                for problem in problems:
                    print(f"{page_path} ({scheme}): {problem}")
                failed += bool(problems)
        browser.close()
    print(f"{len(pages)} page(s) rendered in light and dark; {failed} check(s) failed; screenshots in {shots}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
