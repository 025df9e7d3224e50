"""The app factory and the per-request context every page handler receives.

A handler is ``async def handler(page: Page) -> Response``, registered on a :class:`RouteTable`. The wrapper
around it opens the site's database, loads the session, and for a POST parses the form, checks its CSRF token
(no handler sees a POST without a valid one) and runs the handler in one transaction together with its audit
entry, so a change and its log line are committed or dropped together.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

import jinja2
import jinja2.bccache
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from mcpfleet.sites.common import audit, db, sessions
from mcpfleet.sites.common.forms import Form
from mcpfleet.sites.common.pagination import Pager, paginate
from mcpfleet.sites.common.security import same

COMMON_TEMPLATES = Path(__file__).resolve().parent / "templates"

Handler = Callable[["Page"], Awaitable[Response]]
H = TypeVar("H", bound=Callable[..., Awaitable[Response]])  # a handler, possibly with optional extra parameters


class LoginRequired(Exception):
    """Raised by :meth:`Page.require_user`; answered with a redirect to the sign-in page."""


@dataclass
class RouteTable:
    """Handlers by path and methods, in registration order (Starlette matches in order)."""

    entries: list[tuple[str, Handler, list[str]]] = field(default_factory=list)

    def get(self, path: str) -> Callable[[H], H]:
        return self._add(path, ["GET"])

    def post(self, path: str) -> Callable[[H], H]:
        return self._add(path, ["POST"])

    def form(self, path: str) -> Callable[[H], H]:
        """A page that shows a form (GET) and takes its submission (POST)."""
        return self._add(path, ["GET", "POST"])

    def _add(self, path: str, methods: list[str]) -> Callable[[H], H]:
        def register(handler: H) -> H:
            self.entries.append((path, handler, methods))
            return handler

        return register


@dataclass
class Site:
    """What differs between sites; everything else (sessions, CSRF, errors, audit) is shared."""

    name: str  # audit_log.site, the session cookie's prefix, the `sites` registry key
    title: str
    db_file: str
    templates: Path
    routes: RouteTable
    load_user: Callable[[sqlite3.Connection, int], sqlite3.Row | None]
    actor_name: Callable[[sqlite3.Row], str]
    accent: str = "#2563eb"
    login_path: str = "/login"
    layout: Callable[[Page], dict[str, Any]] | None = None  # extra context every page's layout needs

    @property
    def cookie(self) -> str:
        # Cookies ignore ports: shop, admin and forum on one host must not overwrite each other's session.
        return f"{self.name}_session"


class Page:
    """One request: database, session, signed-in user, the parsed form (POST), helpers to answer."""

    def __init__(self, site: Site, env: jinja2.Environment, request: Request, conn: sqlite3.Connection) -> None:
        self.site = site
        self.env = env
        self.request = request
        self.db = conn
        self.session = sessions.load(conn, site.name, request.cookies.get(site.cookie))
        self.user: sqlite3.Row | None = None
        if self.session and self.session.user_id is not None:
            self.user = site.load_user(conn, self.session.user_id)
        self.form = Form({})
        self.raw_form: FormData | None = None

    # -- request -------------------------------------------------------------------------------------------
    @property
    def params(self) -> Any:
        return self.request.query_params

    def arg(self, name: str, default: str = "") -> str:
        return str(self.request.query_params.get(name, default)).strip()

    def int_arg(self, name: str) -> int | None:
        try:
            return int(self.arg(name))
        except ValueError:
            return None

    def form_list(self, name: str) -> list[str]:
        """Every value of a repeated form field (checkbox groups); ``form`` keeps only the last."""
        if self.raw_form is None:
            return []
        return [v.strip() for v in self.raw_form.getlist(name) if isinstance(v, str)]

    def path_param(self, name: str) -> str:
        return str(self.request.path_params[name])

    def int_path_param(self, name: str) -> int:
        try:
            return int(self.request.path_params[name])
        except ValueError:
            raise HTTPException(404) from None

    def url_with(self, **changes: str | int | None) -> str:
        """The current URL with some query parameters changed (``None`` removes one) and the page reset."""
        params = {k: v for k, v in self.request.query_params.items() if k != "page"}
        for key, value in changes.items():
            if value is None or value == "":
                params.pop(key, None)
            else:
                params[key] = str(value)
        return self.request.url.path + ("?" + urlencode(params) if params else "")

    def paginate(self, total: int, per_page: int) -> Pager:
        return paginate(total, self.request.query_params, self.request.url.path, per_page)

    def next_url(self, default: str = "/") -> str:
        """A same-site path from ``next`` (query or form); anything else falls back to ``default``."""
        value = self.form.get("next") or self.arg("next")
        if value.startswith("/") and not value.startswith("//") and "\\" not in value:
            return value
        return default

    # -- session and user ----------------------------------------------------------------------------------
    def ensure_session(self) -> sessions.Session:
        if self.session is None:
            self.session = sessions.new(self.site.name)
        return self.session

    def csrf_token(self) -> str:
        return self.ensure_session().csrf

    def flash(self, message: str, level: str = "success") -> None:
        self.ensure_session().add_flash(message, level)

    def require_user(self) -> sqlite3.Row:
        if self.user is None:
            raise LoginRequired
        return self.user

    def sign_in(self, user_id: int) -> None:
        session = self.ensure_session()
        session.rotate()
        session.user_id = user_id
        self.user = self.site.load_user(self.db, user_id)

    def sign_out(self) -> None:
        session = self.ensure_session()
        session.rotate()
        session.user_id = None
        session.data = {}
        self.user = None

    @property
    def actor(self) -> str:
        return self.site.actor_name(self.user) if self.user is not None else "anonymous"

    # -- state changes -------------------------------------------------------------------------------------
    def now(self) -> str:
        """The site clock, advanced: the timestamp for a row this request creates."""
        return db.tick(self.db)

    @property
    def today(self) -> str:
        return db.today(self.db)

    def audit(self, action: str, target_type: str | None = None, target_id: object = None, **details: Any) -> None:
        audit.record(
            self.db,
            self.site.name,
            None if self.user is None else int(self.user["id"]),
            self.actor,
            action,
            target_type,
            target_id,
            details,
        )

    # -- responses -----------------------------------------------------------------------------------------
    def render(self, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        flashes = self.session.pop_flashes() if self.session else []
        values: dict[str, Any] = {"page": self, "user": self.user, "site": self.site, "form": self.form}
        if self.site.layout:
            values.update(self.site.layout(self))
        values.update(context)  # the page's own values win over the layout's
        values["flashes"] = flashes
        html = self.env.get_template(template).render(values)
        return HTMLResponse(html, status_code=status_code, headers={"Cache-Control": "no-store"})

    def redirect(self, url: str, message: str | None = None, level: str = "success") -> RedirectResponse:
        if message:
            self.flash(message, level)
        return RedirectResponse(url, status_code=303)

    def error(self, status_code: int, title: str, message: str) -> HTMLResponse:
        return self.render("error.html", status_code=status_code, title=title, message=message)

    def not_found(self, what: str = "page") -> HTTPException:
        return HTTPException(404, f"We couldn't find that {what}.")


ERROR_TITLES = {
    400: "Bad request",
    403: "Access denied",
    404: "Page not found",
    405: "Method not allowed",
}


def _error_response(page: Page, exc: HTTPException) -> HTMLResponse:
    title = ERROR_TITLES.get(exc.status_code, "Something went wrong")
    detail = exc.detail if exc.detail and exc.detail != title else ""
    if exc.status_code == 404 and not detail:
        detail = "The page you were looking for doesn't exist or has been moved."
    return page.error(exc.status_code, title, str(detail))


def _login_redirect(page: Page) -> RedirectResponse:
    if page.request.method == "GET":
        target = page.request.url.path + (f"?{page.request.url.query}" if page.request.url.query else "")
    else:
        target = page.next_url(default="/")
    return page.redirect(f"{page.site.login_path}?{urlencode({'next': target})}", "Please sign in to continue.", "info")


def _finish(page: Page, response: Response) -> Response:
    session = page.session
    if session is not None:
        sessions.save(page.db, session)
        if session.is_new:
            response.set_cookie(page.site.cookie, session.token, httponly=True, samesite="lax", path="/")
    return response


def _money(cents: int | None) -> str:
    if cents is None:
        return ""
    sign = "-" if cents < 0 else ""
    return f"{sign}${abs(cents) / 100:,.2f}"


def _date(value: str | None, fmt: str = "%b %-d, %Y") -> str:
    if not value:
        return ""
    return (
        datetime.fromisoformat(value)
        if "T" in value
        else datetime.combine(date.fromisoformat(value), datetime.min.time())
    ).strftime(fmt)


def _datetime(value: str | None) -> str:
    return _date(value, "%b %-d, %Y, %-I:%M %p") if value else ""


class _Macros:
    """The shared macros as ``m`` in every template, compiled on first use rather than at start-up."""

    def __init__(self, env: jinja2.Environment) -> None:
        self._env = env
        self._module: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._module is None:
            self._module = self._env.get_template("macros.html").module
        return getattr(self._module, name)


class _BytecodeCache(jinja2.FileSystemBytecodeCache):
    """Compiled templates shared by every site process on the machine (atomic writes, checked against the
    template source), so a fresh trial's first pages do not pay for compiling them again. A cache that cannot
    be written (read-only file system) only costs speed, never a page."""

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    from mcpfleet.sites import cache_dir

    folder = cache_dir() / "jinja"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return _BytecodeCache(str(folder))


def make_env(site: Site) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(
            [jinja2.FileSystemLoader(str(site.templates)), jinja2.FileSystemLoader(str(COMMON_TEMPLATES))]
        ),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=_bytecode_cache(),
    )
    env.filters["money"] = _money
    env.filters["date"] = _date
    env.filters["datetime"] = _datetime
    env.globals["m"] = _Macros(env)
    return env


def create_app(site: Site, data_dir: Path) -> Starlette:
    """The site as an ASGI app over ``data_dir/<db_file>``, which must exist (see ``mcpfleet.sites.seed``)."""
    db_path = data_dir / site.db_file
    if not db_path.is_file():
        raise FileNotFoundError(f"{db_path} not found: seed it first (python -m mcpfleet.sites seed {site.name} DIR)")
    env = make_env(site)

    def wrap(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            conn = db.connect(db_path)
            in_tx = False
            try:
                page = Page(site, env, request, conn)
                if request.method == "POST":
                    page.raw_form = await request.form()
                    page.form = Form(page.raw_form)
                    sent = page.form.get("csrf_token")
                    if page.session is None or not sent or not same(sent, page.session.csrf):
                        response: Response = page.error(
                            403,
                            "Form expired",
                            "This form has expired or was not sent from this site. Go back, reload the page and "
                            "try again.",
                        )
                        return _finish(page, response)
                    conn.execute("BEGIN IMMEDIATE")
                    in_tx = True
                try:
                    response = await handler(page)
                except (HTTPException, LoginRequired) as exc:
                    if in_tx:
                        conn.execute("ROLLBACK")
                        in_tx = False
                    response = _login_redirect(page) if isinstance(exc, LoginRequired) else _error_response(page, exc)
                response = _finish(page, response)
                if in_tx:
                    conn.execute("COMMIT")
                    in_tx = False
                return response
            finally:
                if in_tx:
                    conn.execute("ROLLBACK")
                conn.close()

        endpoint.__name__ = handler.__name__
        return endpoint

    async def healthz(request: Request) -> Response:
        conn = db.connect(db_path)
        try:
            db.today(conn)
        finally:
            conn.close()
        return PlainTextResponse("ok")

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        conn = db.connect(db_path)
        try:
            page = Page(site, env, request, conn)
            return _finish(page, _error_response(page, exc))
        finally:
            conn.close()

    async def server_error(request: Request, exc: Exception) -> Response:
        # Starlette re-raises after answering, so the traceback still reaches the log (stderr).
        return HTMLResponse(
            "<!doctype html><html lang=en><title>Something went wrong</title><main><h1>Something went wrong</h1>"
            "<p>The server could not complete your request. Go back and try again.</p><p><a href=/>Home</a></p></main>",
            status_code=500,
        )

    routes = [Route("/healthz", healthz, methods=["GET"])]
    routes += [Route(path, wrap(handler), methods=methods) for path, handler, methods in site.routes.entries]
    return Starlette(routes=routes, exception_handlers={HTTPException: http_error, Exception: server_error})
