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
    pid: str,
    *,
    signal: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["signal"] = signal

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/machines/{namespace}/{name}/processes/{pid}/kill".format(
            namespace=quote(str(namespace), safe=""),
            name=quote(str(name), safe=""),
            pid=quote(str(pid), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Any | ErrorBody | None:
    if response.status_code == 204:
        response_204 = cast(Any, None)
        return response_204

    if response.status_code == 404:
        response_404 = ErrorBody.from_dict(response.json())

        return response_404

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
    pid: str,
    *,
    client: AuthenticatedClient | Client,
    signal: str | Unset = UNSET,
) -> Response[Any | ErrorBody]:
    """Send a signal to a process.

    Args:
        namespace (str):
        name (str):
        pid (str):
        signal (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody]
    """

    kwargs = _get_kwargs(
        namespace=namespace,
        name=name,
        pid=pid,
        signal=signal,
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
    signal: str | Unset = UNSET,
) -> Any | ErrorBody | None:
    """Send a signal to a process.

    Args:
        namespace (str):
        name (str):
        pid (str):
        signal (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody
    """

    return sync_detailed(
        namespace=namespace,
        name=name,
        pid=pid,
        client=client,
        signal=signal,
    ).parsed


async def asyncio_detailed(
    namespace: str,
    name: str,
    pid: str,
    *,
    client: AuthenticatedClient | Client,
    signal: str | Unset = UNSET,
) -> Response[Any | ErrorBody]:
    """Send a signal to a process.

    Args:
        namespace (str):
        name (str):
        pid (str):
        signal (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody]
    """

    kwargs = _get_kwargs(
        namespace=namespace,
        name=name,
        pid=pid,
        signal=signal,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    namespace: str,
    name: str,
    pid: str,
    *,
    client: AuthenticatedClient | Client,
    signal: str | Unset = UNSET,
) -> Any | ErrorBody | None:
    """Send a signal to a process.

    Args:
        namespace (str):
        name (str):
        pid (str):
        signal (str | Unset):

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
            pid=pid,
            client=client,
            signal=signal,
        )
    ).parsed
