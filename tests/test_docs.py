"""The documentation site: the generated reference pages match the code, the site builds under ``mkdocs build
--strict`` (every link, anchor and API reference resolves) with a page for each entry of the nav and nothing loaded
from outside it, and every README link into ``docs/`` names a file that exists.

The site is built once per session (mkdocstrings reads the whole API), in a subprocess as ``make docs`` does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools import docgen

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "mkdocs.yml"


# --- (a) the generated pages ----------------------------------------------------------------------------------------
def test_generated_reference_pages_match_the_code() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "tools.docgen", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, f"stale generated pages (run `python -m tools.docgen`):\n{run.stderr}"


def test_check_names_a_stale_or_missing_page_and_what_differs(tmp_path: Path) -> None:
    assert docgen.stale_pages(tmp_path) == [f"{docgen.CLI_PAGE}: missing", f"{docgen.CONFIG_PAGE}: missing"]
    assert sorted(docgen.write_pages(tmp_path)) == sorted([docgen.CLI_PAGE, docgen.CONFIG_PAGE])
    assert docgen.stale_pages(tmp_path) == []
    assert docgen.write_pages(tmp_path) == []  # nothing to rewrite

    page = tmp_path / docgen.CONFIG_PAGE
    page.write_text(page.read_text().replace("| `writerOutputBufferSize`", "| `writerBufferSize`"))
    [problem] = docgen.stale_pages(tmp_path)
    assert problem.startswith(f"{docgen.CONFIG_PAGE}: stale")
    assert "-| `writerBufferSize`" in problem and "+| `writerOutputBufferSize`" in problem


def test_generated_pages_cover_every_command_option_and_key() -> None:
    import click

    from dlog import cli
    from storage.config import Config

    cli_page = docgen.render_cli()
    root = click.Context(cli, info_name="dlog")
    for name in cli.list_commands(root):
        command = cli.get_command(root, name)
        assert command is not None
        assert f"\n## dlog {name}\n" in cli_page
        for param in command.params:
            if isinstance(param, click.Option):
                assert all(opt in cli_page for opt in param.opts), (name, param.opts)
    config_page = docgen.render_configuration()
    for spec in Config.specs():
        assert f"| `{spec.name}`" in config_page, spec.name


# --- (b) the site ---------------------------------------------------------------------------------------------------
def _nav_pages(nav: list[Any]) -> Iterator[str]:
    for entry in nav:
        if isinstance(entry, str):
            yield entry
        elif isinstance(entry, dict):
            for value in entry.values():
                if isinstance(value, str):
                    yield value
                else:
                    yield from _nav_pages(value)


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(CONFIG), "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return out, run


def test_site_builds_under_strict_with_every_nav_page(site: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, run = site
    warnings = [line for line in run.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert run.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(warnings or run.stderr.splitlines()[-30:])
    config = yaml.safe_load(CONFIG.read_text())
    pages = list(_nav_pages(config["nav"]))
    assert "index.md" in pages and "reference/configuration.md" in pages
    directory_urls = config.get("use_directory_urls", True)
    for page in pages:
        stem = page.removesuffix(".md")
        html = out / (
            f"{stem}.html" if not directory_urls else "index.html" if stem == "index" else f"{stem}/index.html"
        )
        assert html.is_file(), f"{page}: no {html.relative_to(out)} in the built site"
    api = (
        out / ("reference/api/storage.html" if not directory_urls else "reference/api/storage/index.html")
    ).read_text()
    assert 'id="storage.open_namespace"' in api and 'id="storage.errors.DLError"' in api


def test_site_loads_nothing_from_outside(site: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    """No web fonts, scripts or stylesheets from a CDN: the pages read the same offline."""
    out, run = site
    if run.returncode != 0:
        pytest.skip("the site did not build (see the strict-build test)")
    external = re.compile(r"""(?:<script[^>]*\ssrc|<link[^>]*\shref|@import\s+url\(|url\()\s*=?\s*["']?https?://""")
    for path in [*out.rglob("*.html"), *out.rglob("*.css")]:
        match = external.search(path.read_text(encoding="utf-8", errors="replace"))
        assert match is None, f"{path.relative_to(out)} loads {match.group(0)!r}..."


# --- (c) the README's links into docs/ ------------------------------------------------------------------------------
INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)


def docs_links(markdown: str) -> list[str]:
    """The link targets of ``markdown`` (inline and reference-style) that point into ``docs/``, without anchors."""
    targets = [*INLINE_LINK.findall(markdown), *REFERENCE_LINK.findall(markdown)]
    out = []
    for target in targets:
        path = target.split("#", 1)[0].split("?", 1)[0]
        if re.match(r"^(?:\./)?docs/", path):
            out.append(path.removeprefix("./"))
    return out


def test_docs_links_finds_inline_and_reference_links() -> None:
    text = (
        "See [the proxy](docs/proxy.md#client-options), [home](./docs/index.md) and [x](https://example.org/docs/a.md)."
        '\n[cli]: docs/reference/cli.md "CLI"\n'
    )
    assert docs_links(text) == ["docs/proxy.md", "docs/index.md", "docs/reference/cli.md"]


def test_readme_links_into_docs_resolve() -> None:
    missing = [
        link for link in docs_links((ROOT / "README.md").read_text(encoding="utf-8")) if not (ROOT / link).exists()
    ]
    assert missing == [], f"README.md links to files that do not exist: {missing}"
