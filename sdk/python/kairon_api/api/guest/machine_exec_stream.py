from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...types import UNSET, Response, Unset


def _get_kwargs(
    namespace: str,
    name: str,
    *,
    command: str,
    env: str | Unset = UNSET,
    user: str | Unset = UNSET,
    cwd: str | Unset = UNSET,
    tty: bool | Unset = UNSET,
    cols: int | Unset = UNSET,
    rows: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["command"] = command

    params["env"] = env

    params["user"] = user

    params["cwd"] = cwd

    params["tty"] = tty

    params["cols"] = cols

    params["rows"] = rows

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/machines/{namespace}/{name}/exec/stream".format(
            namespace=quote(str(namespace), safe=""),
            name=quote(str(name), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Any | ErrorBody | None:
    if response.status_code == 101:
        response_101 = cast(Any, None)
        return response_101

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ErrorBody.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = ErrorBody.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = ErrorBody.from_dict(response.json())

        return response_409

    if response.status_code == 422:
        response_422 = ErrorBody.from_dict(response.json())

        return response_422

    if response.status_code == 429:
        response_429 = ErrorBody.from_dict(response.json())

        return response_429

    if response.status_code == 502:
        response_502 = ErrorBody.from_dict(response.json())

        return response_502

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if response.status_code == 504:
        response_504 = ErrorBody.from_dict(response.json())

        return response_504

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Any | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    namespace: str,
    name: str,
    *,
    client: AuthenticatedClient | Client,
    command: str,
    env: str | Unset = UNSET,
    user: str | Unset = UNSET,
    cwd: str | Unset = UNSET,
    tty: bool | Unset = UNSET,
    cols: int | Unset = UNSET,
    rows: int | Unset = UNSET,
) -> Response[Any | ErrorBody]:
    """Run a command with its stdin, stdout and stderr streamed over WebSocket: binary frames in
    are its stdin (an empty frame closes stdin), frames out are its output as produced, and its
    exit closes the socket with reason `exit <code>`. With `tty=true` it runs on a terminal
    of `cols` x `rows`. Sandboxes, and VMs whose image runs kairon-agent (a stock qemu-ga
    cannot stream: 409).

    Args:
        namespace (str):
        name (str):
        command (str):
        env (str | Unset):
        user (str | Unset):
        cwd (str | Unset):
        tty (bool | Unset):
        cols (int | Unset):
        rows (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody]
    """

    kwargs = _get_kwargs(
        namespace=namespace,
        name=name,
        command=command,
        env=env,
        user=user,
        cwd=cwd,
        tty=tty,
        cols=cols,
        rows=rows,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    namespace: str,
    name: str,
    *,
    client: AuthenticatedClient | Client,
    command: str,
    env: str | Unset = UNSET,
    user: str | Unset = UNSET,
    cwd: str | Unset = UNSET,
    tty: bool | Unset = UNSET,
    cols: int | Unset = UNSET,
    rows: int | Unset = UNSET,
) -> Any | ErrorBody | None:
    """Run a command with its stdin, stdout and stderr streamed over WebSocket: binary frames in
    are its stdin (an empty frame closes stdin), frames out are its output as produced, and its
    exit closes the socket with reason `exit <code>`. With `tty=true` it runs on a terminal
    of `cols` x `rows`. Sandboxes, and VMs whose image runs kairon-agent (a stock qemu-ga
    cannot stream: 409).

    Args:
        namespace (str):
        name (str):
        command (str):
        env (str | Unset):
        user (str | Unset):
        cwd (str | Unset):
        tty (bool | Unset):
        cols (int | Unset):
        rows (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody
    """

    return sync_detailed(
        namespace=namespace,
        name=name,
        client=client,
        command=command,
        env=env,
        user=user,
        cwd=cwd,
        tty=tty,
        cols=cols,
        rows=rows,
    ).parsed


async def asyncio_detailed(
    namespace: str,
    name: str,
    *,
    client: AuthenticatedClient | Client,
    command: str,
    env: str | Unset = UNSET,
    user: str | Unset = UNSET,
    cwd: str | Unset = UNSET,
    tty: bool | Unset = UNSET,
    cols: int | Unset = UNSET,
    rows: int | Unset = UNSET,
) -> Response[Any | ErrorBody]:
    """Run a command with its stdin, stdout and stderr streamed over WebSocket: binary frames in
    are its stdin (an empty frame closes stdin), frames out are its output as produced, and its
    exit closes the socket with reason `exit <code>`. With `tty=true` it runs on a terminal
    of `cols` x `rows`. Sandboxes, and VMs whose image runs kairon-agent (a stock qemu-ga
    cannot stream: 409).

    Args:
        namespace (str):
        name (str):
        command (str):
        env (str | Unset):
        user (str | Unset):
        cwd (str | Unset):
        tty (bool | Unset):
        cols (int | Unset):
        rows (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody]
    """

    kwargs = _get_kwargs(
        namespace=namespace,
        name=name,
        command=command,
        env=env,
        user=user,
        cwd=cwd,
        tty=tty,
        cols=cols,
        rows=rows,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    namespace: str,
    name: str,
    *,
    client: AuthenticatedClient | Client,
    command: str,
    env: str | Unset = UNSET,
    user: str | Unset = UNSET,
    cwd: str | Unset = UNSET,
    tty: bool | Unset = UNSET,
    cols: int | Unset = UNSET,
    rows: int | Unset = UNSET,
) -> Any | ErrorBody | None:
    """Run a command with its stdin, stdout and stderr streamed over WebSocket: binary frames in
    are its stdin (an empty frame closes stdin), frames out are its output as produced, and its
    exit closes the socket with reason `exit <code>`. With `tty=true` it runs on a terminal
    of `cols` x `rows`. Sandboxes, and VMs whose image runs kairon-agent (a stock qemu-ga
    cannot stream: 409).

    Args:
        namespace (str):
        name (str):
        command (str):
        env (str | Unset):
        user (str | Unset):
        cwd (str | Unset):
        tty (bool | Unset):
        cols (int | Unset):
        rows (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody
    """

    return (
        await asyncio_detailed(
            namespace=namespace,
            name=name,
            client=client,
            command=command,
            env=env,
            user=user,
            cwd=cwd,
            tty=tty,
            cols=cols,
            rows=rows,
        )
    ).parsed
