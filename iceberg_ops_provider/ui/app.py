"""The FastAPI application of the pages, mounted by the api-server at ``/iceberg-ops``.

Every route depends on the api-server's check of the right to read connections; every response carries
``nosniff`` and :data:`CSP` (docs/ui.md, "What the pages guard, and how").
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails, DagAccessEntity, DagDetails
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_connection, requires_access_dag
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Query, Request, status
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from iceberg_ops_provider.errors import CatalogConfigError
from iceberg_ops_provider.runner.namespaces import check_namespace
from iceberg_ops_provider.ui import api_models as models
from iceberg_ops_provider.ui import pages, views
from iceberg_ops_provider.ui.connections import CONN_ID, CatalogConnection, find_connection, list_connections
from iceberg_ops_provider.ui.html import SCRIPT, STYLE
from iceberg_ops_provider.ui.reads import Reads
from iceberg_ops_provider.ui.settings import ui_settings
from iceberg_ops_provider.ui.table_list import ORDERS, SORTS, TableQuery
from iceberg_ops_provider.ui.task_links import MOUNT, URL_ROUTE, read_task, task_target

__all__ = ["READS", "create_app"]

READS = Reads()
"""The application's reads (one per process)."""

_UNPROCESSABLE = 422  # a name from the URL that is not one (Starlette renamed its constant: the number stays)

ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="#0ea5e9" stroke-width="1.8" '
    'stroke-linejoin="round"><path d="M3 15h18"/><path d="M8 15l3-9 2 4 1.5-2L17 15"/>'
    '<path d="M5 15l2.5 5h9l2.5-5"/></svg>'
)

ConnectionId = Annotated[str, Path(description="An Airflow connection of type iceberg_ops or iceberg.", max_length=250)]
Namespace = Annotated[str, Path(description="A namespace (`sales`, nested `lake.sales`).", max_length=1000)]
Page = Annotated[int, Query(ge=1, le=100_000, description="Page of the audit trail, 1 the newest.")]
TableSort = Annotated[
    Literal[SORTS],  # type: ignore[valid-type]
    Query(description="The column the tables are sorted by (`health`: those calling for attention first)."),
]
TableOrder = Annotated[Literal[ORDERS], Query(description="`asc` or `desc`.")]  # type: ignore[valid-type]
TableFilter = Annotated[
    str, Query(alias="filter", max_length=200, description="Only tables whose name holds this text (any case).")
]
TablePage = Annotated[int, Query(ge=1, le=100_000, description="Page of the tables, 1 the first.")]


def _table_query(
    sort: TableSort = "table", order: TableOrder = "asc", table_filter: TableFilter = "", tpage: TablePage = 1
) -> TableQuery:
    """A namespace's table list as its query parameters ask for it (the page and its JSON take the same)."""
    return TableQuery(sort, order, table_filter, tpage)


Tables = Annotated[TableQuery, Depends(_table_query)]
TableName = Annotated[
    str, Path(description="A table of the namespace (its name without the namespace).", max_length=255)
]


CSP = (
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'self'"
)
"""The pages' Content-Security-Policy: their own style, script and icon only, shown in Airflow's frame."""

_HEADERS = {"content-security-policy": CSP, "x-content-type-options": "nosniff", "referrer-policy": "same-origin"}

MAX_MAP_INDEX = 2**31 - 1
"""The largest map index Airflow stores (a 32-bit integer column)."""


def _urls(request: Request) -> pages.Urls:
    root = str(request.scope.get("root_path", "")).rstrip("/")
    airflow = root.removesuffix(MOUNT) if root.endswith(MOUNT) else ""
    return pages.Urls(root=root or MOUNT, airflow=airflow)


def _html(document: str, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(document, status_code=status_code, headers={"Cache-Control": "no-store"})


def _login_url(request: Request, *, framed: bool) -> str | None:
    """Airflow's login, back to the page as Airflow's UI frames it or (a login followed inside the frame) itself."""
    urls = _urls(request)
    inner = request.url.path.removeprefix(urls.airflow)
    query = f"?{request.url.query}" if request.url.query else ""
    back = f"{urls.airflow}/plugin/{URL_ROUTE}{inner}{query}" if framed else f"{request.url.path}{query}"
    try:
        from airflow.api_fastapi.app import get_auth_manager

        return get_auth_manager().get_url_login(next_url=back)
    except Exception:  # no auth manager: the message says enough
        return None


def _error_page(request: Request, code: int, detail: Any) -> Response:
    path = request.url.path
    if f"{MOUNT}/api/" in path or path.endswith("/openapi.json"):  # JSON asked for: JSON answered
        return JSONResponse({"detail": jsonable_encoder(detail)}, status_code=code)
    urls = _urls(request)
    action = login = None
    # No session, an expired one, or one whose token Airflow no longer accepts (signed before a restart):
    if code == status.HTTP_401_UNAUTHORIZED or (code == status.HTTP_403_FORBIDDEN and detail == "Invalid JWT token"):
        title, message = "Log in first", "These pages need a user logged in to Airflow."
        login = _login_url(request, framed=True)
        if login is not None and request.headers.get("sec-fetch-dest") == "document":
            return RedirectResponse(login, status_code=status.HTTP_303_SEE_OTHER, headers={"Cache-Control": "no-store"})
        here = _login_url(request, framed=False)
        action = ("Log in to Airflow", here) if here is not None else None
        code = status.HTTP_401_UNAUTHORIZED
    else:
        title, message = {
            status.HTTP_403_FORBIDDEN: (
                "Not allowed",
                "Your Airflow role may not read connections, which these pages need.",
            ),
            # A name refused by this application's checks, or a parameter refused by its declared values.
            _UNPROCESSABLE: ("Invalid name" if isinstance(detail, str) else "Invalid value", _validation_text(detail)),
            status.HTTP_404_NOT_FOUND: ("Not found", str(detail)),
        }.get(code, (f"Error {code}", str(detail)))
    return _html(pages.message_page(title, message, urls, action=action, login=login), code)


def _validation_text(detail: Any) -> str:
    if isinstance(detail, list):
        return "; ".join(f"{'.'.join(str(p) for p in item.get('loc', ()))}: {item.get('msg')}" for item in detail)
    return str(detail)


def _connection(connection_id: str) -> CatalogConnection:
    if not CONN_ID.match(connection_id):
        raise HTTPException(
            _UNPROCESSABLE,
            f"{connection_id[:60]!r} is not a connection id (letters, digits, '_', '.' and '-').",
        )
    settings = ui_settings()
    conn = find_connection(connection_id, settings.connections, settings.cache_seconds)
    if conn is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"No connection {connection_id!r} of type iceberg_ops or iceberg."
        )
    return conn


def _checked(what: str, name: str) -> str:
    """A namespace or a table's name from the URL, or a 422 saying what is wrong with it."""
    try:
        check_namespace(what, name)
    except CatalogConfigError as exc:
        text = str(exc)
        raise HTTPException(_UNPROCESSABLE, text if what == "namespace" else text.replace("namespace", "name")) from exc
    if what == "table" and "." in name:
        raise HTTPException(_UNPROCESSABLE, f"table {name!r} must be one name, without '.'")
    return name


def _catalogs(user: Any) -> dict[str, Any]:
    from airflow.api_fastapi.app import get_auth_manager

    settings, manager = ui_settings(), get_auth_manager()
    readable = [
        conn
        for conn in list_connections(settings.connections, settings.cache_seconds)
        if manager.is_authorized_connection(method="GET", details=ConnectionDetails(conn_id=conn.conn_id), user=user)
    ]
    return views.catalogs_view(readable, settings, READS)


def _catalog(connection_id: str) -> dict[str, Any]:
    return views.catalog_view(_connection(connection_id), ui_settings(), READS)


def _namespace(connection_id: str, namespace: str, page: int, tables: TableQuery) -> dict[str, Any]:
    conn = _connection(connection_id)
    checked = _checked("namespace", namespace)
    return views.namespace_view(conn, checked, ui_settings(), READS, page=page, tables=tables)


def _table(connection_id: str, namespace: str, table: str, user: Any) -> dict[str, Any]:
    conn = _connection(connection_id)
    settings = ui_settings()
    try:
        view = views.table_view(conn, _checked("namespace", namespace), _checked("table", table), settings, READS)
    except views.TableNotFound as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from exc
    view["trigger"] = _trigger(settings.maintenance_dag, namespace, table, user)
    return view


def _trigger(dag_id: str | None, namespace: str, table: str, user: Any) -> dict[str, Any] | None:
    """The maintenance DAG and the run config naming the table, when ``user`` may trigger that DAG."""
    if dag_id is None:
        return None
    from airflow.api_fastapi.app import get_auth_manager

    allowed = get_auth_manager().is_authorized_dag(
        method="POST", access_entity=DagAccessEntity.RUN, details=DagDetails(id=dag_id), user=user
    )
    conf = {"namespace": namespace, "tables": [f"{namespace}.{table}"]}
    return {"dag_id": dag_id, "conf": conf} if allowed else None


def create_app() -> FastAPI:
    """The application (the api-server mounts it at ``/iceberg-ops``; tests may mount it themselves)."""
    app = FastAPI(
        title="iceberg-ops",
        summary="Iceberg catalogs, namespaces and tables as iceberg-ops sees them: read only.",
        description=(
            "The data of the Iceberg pages of Airflow's UI as JSON, for dashboards and scripts. Every endpoint "
            "needs an Airflow user allowed to read connections (a JWT as `Authorization: Bearer <token>`, from "
            "`POST /auth/token`, or the UI's session cookie). A part of a page the catalog could not give in time "
            "is `null` and its error is in `errors`, naming the catalog."
        ),
        version="1",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    # Everything needs a user who may read connections; only the navigation's icon (a static picture every
    # user's menu shows) is outside the check.
    guarded = APIRouter(dependencies=[Depends(requires_access_connection("GET"))])

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Any) -> Response:
        """Every response says what it is (nosniff) and what its page may load (the CSP)."""
        response = await call_next(request)
        for name, value in _HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        response = _error_page(request, exc.status_code, exc.detail)
        response.headers.update(exc.headers or {})
        return response

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        # Only where and what: pydantic's errors also echo the input, which may be kilobytes of URL.
        errors = [{key: error[key] for key in ("loc", "msg", "type") if key in error} for error in exc.errors()]
        return _error_page(request, _UNPROCESSABLE, errors)

    @guarded.get("/", include_in_schema=False)
    def catalogs_html(request: Request, user: GetUserDep) -> HTMLResponse:
        return _html(pages.catalogs_page(_catalogs(user), _urls(request)))

    @guarded.get("/c/{connection_id}/", include_in_schema=False)
    def catalog_html(request: Request, connection_id: ConnectionId) -> HTMLResponse:
        return _html(pages.catalog_page(_catalog(connection_id), _urls(request)))

    @guarded.get("/c/{connection_id}", include_in_schema=False)
    def catalog_html_slash(request: Request, connection_id: ConnectionId) -> RedirectResponse:
        return RedirectResponse(_urls(request).catalog(connection_id), status_code=status.HTTP_307_TEMPORARY_REDIRECT)

    @guarded.get("/c/{connection_id}/ns/{namespace}", include_in_schema=False)
    def namespace_html(
        request: Request,
        connection_id: ConnectionId,
        namespace: Namespace,
        tables: Tables,
        page: Page = 1,
    ) -> HTMLResponse:
        return _html(pages.namespace_page(_namespace(connection_id, namespace, page, tables), _urls(request)))

    @guarded.get("/c/{connection_id}/ns/{namespace}/t/{table}", include_in_schema=False)
    def table_html(
        request: Request, connection_id: ConnectionId, namespace: Namespace, table: TableName, user: GetUserDep
    ) -> HTMLResponse:
        return _html(pages.table_page(_table(connection_id, namespace, table, user), _urls(request)))

    @guarded.get(
        "/tasks/{dag_id}/{dag_run_id}/{task_id}",
        include_in_schema=False,
        dependencies=[Depends(requires_access_dag("GET", DagAccessEntity.TASK_INSTANCE))],
    )
    def task_page(
        request: Request,
        dag_id: str,
        dag_run_id: str,
        task_id: str,
        session: SessionDep,
        map_index: Annotated[int, Query(ge=-1, le=MAX_MAP_INDEX)] = -1,
    ) -> Response:
        urls = _urls(request)
        found = read_task(session, dag_id, dag_run_id, task_id, map_index)
        if found is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"No task instance {dag_id}.{task_id} in run {dag_run_id}.")
        task_type, rendered = found
        try:
            target = task_target(task_type, rendered)
        except ValueError as exc:
            raise HTTPException(_UNPROCESSABLE, str(exc)) from exc
        if target is None:
            message = (
                f"Task {task_id} ({task_type}) has no Iceberg page: it is not a task of iceberg-ops, or it has not "
                "run yet (its namespace or table is known once its fields are rendered)."
            )
            return _html(pages.message_page("No Iceberg page", message, urls), status.HTTP_404_NOT_FOUND)
        if target.table is None:
            inner = urls.namespace(target.conn_id, target.namespace)
        else:
            inner = urls.table(target.conn_id, target.namespace, target.table)
        return RedirectResponse(f"{urls.airflow}/plugin/{URL_ROUTE}{inner}", status_code=status.HTTP_303_SEE_OTHER)

    @app.get("/icon.svg", include_in_schema=False)
    def icon() -> Response:
        return Response(ICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=3600"})

    # The pages' own style and script: the same for every user, holding nothing of any catalog.
    @app.get("/static/pages.css", include_in_schema=False)
    def style() -> Response:
        return Response(STYLE, media_type="text/css", headers={"Cache-Control": "max-age=3600"})

    @app.get("/static/pages.js", include_in_schema=False)
    def script() -> Response:
        return Response(SCRIPT, media_type="text/javascript", headers={"Cache-Control": "max-age=3600"})

    @guarded.get("/api/catalogs", response_model=models.CatalogsResponse, tags=["Iceberg"])
    def catalogs_json(user: GetUserDep) -> Any:
        """Every catalog connection the user may read: its kind, endpoint, timeout and whether it answers."""
        return _catalogs(user)

    @guarded.get("/api/c/{connection_id}", response_model=models.CatalogResponse, tags=["Iceberg"])
    def catalog_json(connection_id: ConnectionId) -> Any:
        """A catalog's namespaces, each with its current version, pending and failed migrations, and lock."""
        return _catalog(connection_id)

    @guarded.get("/api/c/{connection_id}/ns/{namespace}", response_model=models.NamespaceResponse, tags=["Iceberg"])
    def namespace_json(
        connection_id: ConnectionId,
        namespace: Namespace,
        tables: Tables,
        page: Page = 1,
    ) -> Any:
        """A namespace: versions, status, lock, unsettled run, a page of its audit trail, and a page of its tables.

        The tables are filtered by name (`filter`), sorted (`sort`, `order`) and paged (`tpage`), each with its
        health `status` (as `iceberg-ops maintain queue` measures it) and its `policy` state.
        """
        return _namespace(connection_id, namespace, page, tables)

    @guarded.get(
        "/api/c/{connection_id}/ns/{namespace}/t/{table}", response_model=models.TableResponse, tags=["Iceberg"]
    )
    def table_json(connection_id: ConnectionId, namespace: Namespace, table: TableName, user: GetUserDep) -> Any:
        """A table: metadata, schema, specs, refs, snapshots, file sizes, health, policy, maintenance, moves."""
        return _table(connection_id, namespace, table, user)

    @guarded.get("/openapi.json", include_in_schema=False)
    def openapi(request: Request) -> JSONResponse:
        return JSONResponse({**app.openapi(), "servers": [{"url": _urls(request).root}]})

    @guarded.get("/docs", include_in_schema=False)
    def docs(request: Request) -> HTMLResponse:
        return _html(pages.api_page(app.openapi(), _urls(request)))

    app.include_router(guarded)
    return app
