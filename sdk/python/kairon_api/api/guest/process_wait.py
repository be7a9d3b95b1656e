from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.process import Process
from ...types import UNSET, Response, Unset


def _get_kwargs(
    namespace: str,
    name: str,
    pid: str,
    *,
    timeout_seconds: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["timeoutSeconds"] = timeout_seconds

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/machines/{namespace}/{name}/processes/{pid}/wait".format(
            namespace=quote(str(namespace), safe=""),
            name=quote(str(name), safe=""),
            pid=quote(str(pid), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Process | None:
    if response.status_code == 200:
        response_200 = Process.from_dict(response.json())

        return response_200

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Process]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    namespace: str,
    name: str,
    pid: str,
    *,
    client: AuthenticatedClient | Client,
    timeout_seconds: int | Unset = UNSET,
) -> Response[Process]:
    """Wait for a process to exit (answers its state when it does, or when the timeout passes).

    Args:
        namespace (str):
        name (str):
        pid (str):
        timeout_seconds (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Process]
    """

    kwargs = _get_kwargs(
        namespace=namespace,
        name=name,
        pid=pid,
        timeout_seconds=timeout_seconds,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    namespace: str,
    name: str,
    pid: str,
    *,
    client: AuthenticatedClient | Client,
    timeout_seconds: int | Unset = UNSET,
) -> Process | None:
    """Wait for a process to exit (answers its state when it does, or when the timeout passes).

    Args:
        namespace (str):
        name (str):
        pid (str):
        timeout_seconds (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Process
    """

    return sync_detailed(
        namespace=namespace,
        name=name,
        pid=pid,
        client=client,
        timeout_seconds=timeout_seconds,
    ).parsed


async def asyncio_detailed(
    namespace: str,
    name: str,
    pid: str,
    *,
    client: AuthenticatedClient | Client,
    timeout_seconds: int | Unset = UNSET,
) -> Response[Process]:
    """Wait for a process to exit (answers its state when it does, or when the timeout passes).

    Args:
        namespace (str):
        name (str):
        pid (str):
        timeout_seconds (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Process]
    """

    kwargs = _get_kwargs(
        namespace=namespace,
        name=name,
        pid=pid,
        timeout_seconds=timeout_seconds,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    namespace: str,
    name: str,
    pid: str,
    *,
    client: AuthenticatedClient | Client,
    timeout_seconds: int | Unset = UNSET,
) -> Process | None:
    """Wait for a process to exit (answers its state when it does, or when the timeout passes).

    Args:
        namespace (str):
        name (str):
        pid (str):
        timeout_seconds (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Process
    """

    return (
        await asyncio_detailed(
            namespace=namespace,
            name=name,
            pid=pid,
            client=client,
            timeout_seconds=timeout_seconds,
        )
    ).parsed
