from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.machine_metrics import MachineMetrics
from ...types import UNSET, Response, Unset


def _get_kwargs(
    namespace: str,
    name: str,
    *,
    window_millis: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["windowMillis"] = window_millis

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/machines/{namespace}/{name}/metrics".format(
            namespace=quote(str(namespace), safe=""),
            name=quote(str(name), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | MachineMetrics | None:
    if response.status_code == 200:
        response_200 = MachineMetrics.from_dict(response.json())

        return response_200

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

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | MachineMetrics]:
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
    window_millis: int | Unset = UNSET,
) -> Response[ErrorBody | MachineMetrics]:
    """What a Machine uses now: CPU over a short window (percent of one core), memory against its
    limit, its disk and network, its processes. Sampled on its node; reading them neither wakes
    the Machine nor counts as activity. A paused Machine shows its memory and no CPU.

    Args:
        namespace (str):
        name (str):
        window_millis (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | MachineMetrics]
    """

    kwargs = _get_kwargs(
        namespace=namespace,
        name=name,
        window_millis=window_millis,
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
    window_millis: int | Unset = UNSET,
) -> ErrorBody | MachineMetrics | None:
    """What a Machine uses now: CPU over a short window (percent of one core), memory against its
    limit, its disk and network, its processes. Sampled on its node; reading them neither wakes
    the Machine nor counts as activity. A paused Machine shows its memory and no CPU.

    Args:
        namespace (str):
        name (str):
        window_millis (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | MachineMetrics
    """

    return sync_detailed(
        namespace=namespace,
        name=name,
        client=client,
        window_millis=window_millis,
    ).parsed


async def asyncio_detailed(
    namespace: str,
    name: str,
    *,
    client: AuthenticatedClient | Client,
    window_millis: int | Unset = UNSET,
) -> Response[ErrorBody | MachineMetrics]:
    """What a Machine uses now: CPU over a short window (percent of one core), memory against its
    limit, its disk and network, its processes. Sampled on its node; reading them neither wakes
    the Machine nor counts as activity. A paused Machine shows its memory and no CPU.

    Args:
        namespace (str):
        name (str):
        window_millis (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | MachineMetrics]
    """

    kwargs = _get_kwargs(
        namespace=namespace,
        name=name,
        window_millis=window_millis,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    namespace: str,
    name: str,
    *,
    client: AuthenticatedClient | Client,
    window_millis: int | Unset = UNSET,
) -> ErrorBody | MachineMetrics | None:
    """What a Machine uses now: CPU over a short window (percent of one core), memory against its
    limit, its disk and network, its processes. Sampled on its node; reading them neither wakes
    the Machine nor counts as activity. A paused Machine shows its memory and no CPU.

    Args:
        namespace (str):
        name (str):
        window_millis (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | MachineMetrics
    """

    return (
        await asyncio_detailed(
            namespace=namespace,
            name=name,
            client=client,
            window_millis=window_millis,
        )
    ).parsed
