"""The instructor's live view of a room: a JupyterHub service, at ``/services/room/`` on the hub.

``krmcourse hub start`` makes the hub run it (as root, on 127.0.0.1 only, see :func:`krmcourse.hub.configure`).
It shows, per learner, the labs they have up and, per exercise, what the learner's own checks said last
(solved, stuck with the hint they saw, not tried): :func:`krmcourse.workshop.progress` on the learner's
state folder, so nothing runs on their clusters. The page reloads itself every few seconds. Its buttons
reset a learner's lab, or reset it at an exercise, by running ``krmcourse reset`` as that learner
(:func:`krmcourse.hub.as_learner`, as the hub's own hooks do).

Who sees what is the hub's business: JupyterHub's OAuth (``HubOAuthenticated``) lets in only users with
``access:services!service=room``, which the hub gives every user; this module then shows an admin the
whole room, and a learner their own row only. Its forms carry the XSRF token the hub's auth checks.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
from tornado import escape, web
from tornado.template import Template

from . import catalog, hub, workshop

#: How often the page reloads itself: a learner's solved exercise shows within this (and a check's run).
REFRESH_SECONDS = 3

PAGE = Template("""<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{{ refresh }}">
<title>krmcourse: the room</title>
<style>body{font-family:sans-serif;margin:1em} table{border-collapse:collapse;margin-bottom:1em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left} .solved{background:#dfd} .stuck{background:#fdd}
.error{background:#fd9} form{display:inline}</style></head>
<body><h1>{{ title }}</h1><p>{{ user }}; this page reloads every {{ refresh }} s.</p>
{% for learner in learners %}<section id="learner-{{ learner['name'] }}"><h2>{{ learner['name'] }}</h2>
{% if learner['reset'] %}<p class="reset" data-state="{{ learner['reset'].state }}">
{{ learner['reset'].line() }}</p>{% end %}
{% if not learner['labs'] %}<p>No lab up.</p>{% end %}
{% for lab, rows in learner['labs'].items() %}<table data-lab="{{ lab }}">
<tr><th colspan="3">{{ lab }}: up</th><th>{% raw button(learner['name'], lab, '', 'reset this lab') %}</th></tr>
{% for row in rows %}<tr data-exercise="{{ lab }}/{{ row['exercise'] }}" data-state="{{ row['state'] }}"
 class="{{ row['state'] }}"><td>{{ row['exercise'] }}</td><td>{{ row['state'] }}</td><td>{{ row['hint'] }}</td>
<td>{% raw button(learner['name'], lab, row['exercise'], 'reset at ' + row['exercise']) %}</td></tr>{% end %}
</table>{% end %}</section>{% end %}
</body></html>""")


@dataclass
class Reset:
    """A reset the view started for one learner, and how it went."""

    what: str
    state: str = "running"
    said: str = ""
    #: The task that runs it (kept here: the event loop holds only a weak reference to a task).
    task: asyncio.Task[None] | None = None

    def line(self) -> str:
        if self.state == "running":
            return f"{self.what}: running"
        if self.state == "done":
            return f"{self.what}: done"
        return (f"{self.what}: failed: {self.said[-500:]} (the learner can run 'krmcourse doctor', then the same "
                "reset in a terminal)")


class RoomHandler(HubOAuthenticated, web.RequestHandler):  # type: ignore[misc]
    """The page (GET) and its reset buttons (POST)."""

    def initialize(self, folder: Path, resets: dict[str, Reset]) -> None:
        self.folder = folder
        self.resets = resets

    def visible(self) -> list[str]:
        """The learners the logged-in user may see and reset: all for a hub admin, else only themselves."""
        user: dict[str, Any] = self.current_user
        learners = hub.room_in(self.folder).learners
        if user.get("admin"):
            return learners
        if user["name"] in learners:
            return [user["name"]]
        raise web.HTTPError(403, f"{user['name']} is neither a hub admin nor one of this room's learners. "
                                 "Log in as the room's admin, or as a learner, to see the room.")

    @web.authenticated
    def get(self) -> None:
        names = self.visible()
        learners = [{"name": n, "reset": self.resets.get(n), "labs": labs_of(n)} for n in names]
        admin = bool(self.current_user.get("admin"))
        self.finish(PAGE.generate(refresh=REFRESH_SECONDS, learners=learners, button=self.button,
                                  title="The room" if admin else "Your labs",
                                  user=f"Logged in as {self.current_user['name']}"))

    def button(self, name: str, lab: str, exercise: str, label: str) -> str:
        fields = "".join(f'<input type="hidden" name="{k}" value="{escape.xhtml_escape(v)}">'
                         for k, v in (("learner", name), ("lab", lab), ("at", exercise)))
        submit = f"<button>{escape.xhtml_escape(label)}</button>"
        return f'<form method="post">{self.xsrf_form_html()}{fields}{submit}</form>'

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Say why (the refusals above say what to do next), not only the status."""
        error = kwargs.get("exc_info", (None, None, None))[1]
        said = error.log_message if isinstance(error, web.HTTPError) and error.log_message else self._reason
        self.finish(f"<!doctype html><title>{status_code}</title><p>{status_code}: {escape.xhtml_escape(said)}</p>")

    @web.authenticated
    def post(self) -> None:
        name, lab, at = (self.get_body_argument(k, "") for k in ("learner", "lab", "at"))
        if name not in self.visible():
            raise web.HTTPError(403, f"{self.current_user['name']} may not reset {name!r}'s labs.")
        if lab not in catalog.names() or (at and at not in [e.id for e in catalog.get(lab).exercises]):
            raise web.HTTPError(400, f"There is no lab {lab!r}" + (f" with an exercise {at!r}" if at else "") +
                                "; reload the page and use its buttons.")
        if (running := self.resets.get(name)) and running.state == "running":
            raise web.HTTPError(409, f"{running.what} is still running; wait for it (the page says when it is done).")
        record = self.resets[name] = Reset(f"reset {lab}" + (f" at {at}" if at else ""))
        record.task = asyncio.get_running_loop().create_task(reset(self.folder, name, lab, at, record))
        self.redirect(self.request.path, status=303)


def labs_of(name: str) -> dict[str, list[dict[str, str]]]:
    """A learner's labs that are up, each with its exercises' rows, from what their own checks saved."""
    up = sorted(hub.labs_up(name))
    if not up:  # (nor an account, if it was just removed)
        return {}
    rows = workshop.progress(up, state=hub.learner_state(name))
    labs: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        if row["state"] != "not up":
            labs.setdefault(row["lab"], []).append(row)
    return labs


async def reset(folder: Path, name: str, lab: str, at: str, record: Reset) -> None:
    """``krmcourse reset LAB [--at EX]`` as the learner, in their environment."""
    argv = hub.as_learner(name, hub.room_in(folder), "reset", lab, *(["--at", at] if at else []))
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL, cwd="/",
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    record.said = out.decode(errors="replace").strip()
    record.state = "done" if proc.returncode == 0 else "failed"
    print(f"{record.what} for {name}: {record.state} in {time.monotonic() - started:.1f} s", flush=True)


async def serve(folder: Path) -> None:
    url = urlparse(os.environ["JUPYTERHUB_SERVICE_URL"])
    if url.hostname != "127.0.0.1" or url.port is None:
        raise SystemExit(f"The room's view must listen on 127.0.0.1 and a port, not {url.geturl()}; 'krmcourse hub "
                         "stop', then 'start', writes the hub's configuration again.")
    prefix = os.environ["JUPYTERHUB_SERVICE_PREFIX"]
    resets: dict[str, Reset] = {}
    app = web.Application([(prefix, RoomHandler, {"folder": folder, "resets": resets}),
                           (prefix + "oauth_callback", HubOAuthCallbackHandler)],
                          cookie_secret=secrets.token_bytes(32), xsrf_cookies=True)
    app.listen(url.port, address=url.hostname)
    print(f"The room's view listens on {url.geturl()}{prefix}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    # The hub runs learners' labs on kwok (see hub._clusters_of): say so, rather than probe every provider.
    os.environ.setdefault("KRMCOURSE_PROVIDER", "kwok")
    asyncio.run(serve(Path(sys.argv[1])))


if __name__ == "__main__":
    main()
