"""Links in notes: a link leaves the site only as an absolute URL, whatever a browser would make of its href (tabs,
newlines, backslashes, controls), and links to URLs, mail and this site stay."""

from __future__ import annotations

import re

import pytest

from registry.team.notes import _link_filter, render


@pytest.mark.parametrize(
    "link",
    [
        "//evil.example/x",
        "\\\\evil.example",
        "/\\evil.example",
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        " //evil.example",
    ],
)
def test_note_links_leave_the_site_only_as_absolute_urls(link):
    html = render(f"[click]({link})")
    assert "href" not in html and "evil" not in html.split(">click")[0].split("rel=")[0]


@pytest.mark.parametrize(
    "link", ["https://github.com/ggml-org/llama.cpp", "mailto:team@example.org", "/pairs/1/", "notes/2"]
)
def test_note_links_to_urls_mail_and_this_site_stay(link):
    assert f'href="{link}"' in render(f"[x]({link})")


def _as_a_browser_reads(href: str) -> str:
    """What the WHATWG URL parser makes of an href before resolving it: leading/trailing C0 controls and
    spaces stripped, every ASCII tab and newline removed, and (for http(s) pages) backslashes read as slashes."""
    href = href.strip("".join(map(chr, range(0x21))))
    return re.sub(r"[\t\n\r]", "", href).replace("\\", "/")


@pytest.mark.parametrize(
    "link", ["/\n/evil.example", "/\r\n/evil.example", "/\r/evil.example", "/\n\\evil.example", "\\\n\\evil.example"]
)
def test_a_newline_inside_a_note_link_does_not_make_it_protocol_relative(link):
    html = str(render(f"[click]({link})"))
    hrefs = re.findall(r'href="([^"]*)"', html)
    assert not any(_as_a_browser_reads(h).startswith("//") for h in hrefs), html


@pytest.mark.parametrize(
    "href",
    [
        "/\n/evil.example",
        "/\r\n/evil.example",
        "/\r/evil.example",
        "/\t/evil.example",
        "\t//evil.example",
        "\x00 //evil.example",
        "\x1f//evil.example",
        "/\\evil.example",
        "\\\\evil.example",
        "\\/evil.example",
        "java\nscript:alert(1)",
        "java\tscript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:msgbox(1)",
        "ftp://evil.example/",
    ],
)
def test_links_that_leave_the_site_in_disguise_lose_their_href(href):
    assert _link_filter("a", "href", href) is None


@pytest.mark.parametrize(
    "href, followed",
    [
        ("https://github.com/ggml-org/llama.cpp", "https://github.com/ggml-org/llama.cpp"),
        (" HTTPS://example.org/a ", "HTTPS://example.org/a"),
        ("mailto:team@example.org", "mailto:team@example.org"),
        ("/pairs/1/", "/pairs/1/"),
        ("notes/2", "notes/2"),
        ("?q=a:b", "?q=a:b"),
        ("#drafts", "#drafts"),
        ("/pa\nirs/1/", "/pairs/1/"),  # the page gets the URL the browser would follow
    ],
)
def test_links_to_urls_mail_and_this_site_stay_as_a_browser_reads_them(href, followed):
    assert _link_filter("a", "href", href) == followed
