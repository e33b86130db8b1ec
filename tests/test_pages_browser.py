"""The pages an instructor opens, in a real browser (headless Chromium): the feedback page
the class run's feedback step writes and formgrader's submission page, served by a real
Jupyter server with the course's configuration, over a notebook full of hostile content
(left in autograded/ as it is, so the page itself must clean it). No script, event
handler, CSS-animation-fired handler or ``javascript:`` link of the learner's may run or
remain; the pages still show the learner's text.

Needs Debian's chromium and chromium-driver (`make browser` installs them).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from nbgrader.api import Gradebook
from support import browser
from support.classroom import copy_course, submission, write_submissions

from tilelab.classroom import course

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")]

REPO = Path(__file__).resolve().parents[1]
STUDENT, ASSIGNMENT = "mallory", "01-naive"


def ran(mark: str) -> str:
    """JavaScript that records, when it runs, that ``mark`` ran."""
    return f"(window.__tl_ran=window.__tl_ran||[]).push('{mark}')"


MARKDOWN = "\n\n".join([
    "# Hostile notes",
    f"<script>{ran('script')}</script>",
    f'<img src="x" onerror="{ran("onerror")}">',
    f"[click](javascript:{ran('md-link')})",
    f'<a href=" JaVa&#x09;ScRiPt:{ran("a-link")}">tabbed</a>',
    f'<svg onload="{ran("svg")}"><script>{ran("svg-script")}</script></svg>',
    f'<details open ontoggle="{ran("toggle")}">d</details>',
    # handlers the page's own CSS animations would fire (fa-spin, progress-bar-stripes)
    f'<i class="fa fa-spin" onanimationstart="{ran("fa-spin")}">spin</i>',
    f'<div class="progress progress-striped active"><div class="progress-bar" '
    f'onanimationstart="{ran("stripes")}" onanimationiteration="{ran("stripes2")}">bar</div>'
    "</div>",
    f'<style>@keyframes k{{from{{opacity:0}}}}</style><b style="animation:k 1s" '
    f'onanimationstart="{ran("own-keyframes")}">k</b>',
    # a blank line inside a kept attribute, then a link markdown would make a handler of
    f'<a title="x\n\n[y](https://example.invalid) onanimationstart={ran("blank-line")} '
    'class=fa-spin">after the blank line</a>',
    f"$\\href{{javascript:{ran('mathjax')}}}{{math}}$",
    "Visible learner text: tiles of 16.",
])
OUTPUTS = [
    {"output_type": "display_data", "metadata": {}, "data": {
        "text/html": f"<script>{ran('html-output')}</script><b onclick=\"{ran('click')}\">"
                     "html output</b>", "text/plain": "<HTML>"}},
    {"output_type": "display_data", "metadata": {}, "data": {
        "application/javascript": ran("javascript-output")}},
    {"output_type": "display_data", "metadata": {}, "data": {
        "image/svg+xml": f'<svg xmlns="http://www.w3.org/2000/svg" onload="{ran("svg-out")}"/>'}},
    {"output_type": "display_data", "metadata": {}, "data": {
        "text/vnd.mermaid": f"</pre><script>{ran('mermaid')}</script>"}},
    {"output_type": "display_data", "metadata": {"image/png": {
        "width": f"1 onerror={ran('png-width')}"}}, "data": {"image/png": "eA=="}},
    {"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": {
        "text/markdown": f'<img src=x onerror="{ran("md-output")}">', "text/plain": "md"}},
]
COMMENT = (f'error: #error <img src=x onerror="{ran("comment")}"> '
           f"[here](javascript:{ran('comment-link')})")


def hostile_autograded(root: Path) -> int:
    """The course with mallory's hostile notebook in autograded/ and a comment that
    quotes it in the gradebook; her submitted notebook's id in the gradebook."""
    copy_course(root)
    nb = submission(ASSIGNMENT, {})
    nb["cells"].append({"cell_type": "markdown", "metadata": {"tags": [
        f'x" onmouseover="{ran("tag")}']}, "source": MARKDOWN})
    nb["cells"].append({"cell_type": "code", "metadata": {}, "execution_count": 1,
                        "source": "display(...)", "outputs": OUTPUTS})
    nb["metadata"]["title"] = f"</title><script>{ran('title')}</script>"
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {}, "version_major": 2, "version_minor": 0,
        "x": f"</script><script>{ran('widgets')}</script>"}}
    data = json.dumps(nb).encode()
    write_submissions(root, {(STUDENT, ASSIGNMENT): data})
    api = course.open_api(root)
    course.ensure_in_gradebook(api, ASSIGNMENT)
    graded = root / "autograder" / "autograded" / STUDENT / ASSIGNMENT / "naive.ipynb"
    graded.parent.mkdir(parents=True)
    graded.write_bytes(data)
    with Gradebook(api.coursedir.db_url, "tilelab") as gb:
        gb.add_submission(ASSIGNMENT, STUDENT)
        gb.find_comment("kernel_naive", "naive", ASSIGNMENT, STUDENT).manual_comment = COMMENT
        gb.db.commit()
        return gb.find_submission_notebook("naive", ASSIGNMENT, STUDENT).id


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory):
    why = browser.missing()
    if why:
        pytest.skip(why)
    yield from browser.chromium(tmp_path_factory.mktemp("chromium-profile"))


@pytest.fixture(scope="module")
def course_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("pages") / "course"
    return root, hostile_autograded(root)


def assert_inert(driver, url: str) -> str:
    """Load ``url``, let its animations and loads happen, and check nothing of the
    learner's ran or stays active; the page's visible text."""
    driver.get(url)
    for _ in range(200):
        if driver.execute_script("return document.readyState") == "complete":
            break
        time.sleep(0.05)
    time.sleep(1.5)  # CSS animations start, images fail, details toggle
    assert driver.execute_script("return window.__tl_ran || []") == []
    active = driver.execute_script("""
        const found = [];
        for (const e of document.querySelectorAll('*')) {
          for (const a of e.attributes) {
            const v = a.value.replace(/[\\s\\u0000-\\u001f]/g, '').toLowerCase();
            if (a.value.includes('__tl_ran')) found.push(e.tagName + ' ' + a.name);
            if (['href', 'src', 'action', 'formaction', 'xlink:href'].includes(a.name)
                && /^(javascript|vbscript|data:text)/.test(v)) found.push(e.tagName + ' ' + v);
          }
          if (e.tagName === 'SCRIPT' && e.textContent.includes('__tl_ran'))
            found.push('script');
        }
        return found;""")
    assert active == []
    return driver.execute_script("return document.body.innerText")


def test_the_feedback_page_runs_nothing_of_the_learners(driver, course_root):
    root, _ = course_root
    api = course.open_api(root)  # as the class run's feedback step makes it
    result = api.generate_feedback(ASSIGNMENT, STUDENT, force=True)
    assert result["success"], result.get("log")
    page = root / "autograder" / "feedback" / STUDENT / ASSIGNMENT / "naive.html"
    text = assert_inert(driver, page.as_uri())
    assert "Visible learner text: tiles of 16." in text and "#error" in text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def formgrader(course_root, tmp_path_factory):
    """A Jupyter server with formgrader, started in the course's autograder/ folder as an
    instructor starts it; its base URL and token."""
    root, _ = course_root
    port, token = _free_port(), "tilelab-test-token"
    home = tmp_path_factory.mktemp("jupyter-home")
    (home / "config").mkdir()
    (home / "config" / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": {"nbgrader.server_extensions.formgrader": True}}}))
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(home),
           "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_RUNTIME_DIR": str(home / "rt")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={root}", "--allow-root"],
        cwd=root / "autograder", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("the Jupyter server did not start: "
                            + proc.stderr.read().decode()[-2000:])
            time.sleep(0.5)
    yield base, token
    os.killpg(proc.pid, 9)
    proc.wait()


def test_the_formgrader_submission_page_runs_nothing_of_the_learners(driver, course_root,
                                                                       formgrader):
    _, submission_id = course_root
    base, token = formgrader
    text = assert_inert(driver, f"{base}/formgrader/submissions/{submission_id}/?token={token}")
    assert "Visible learner text: tiles of 16." in text
