from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.kairon_template import KaironTemplate
from ...types import UNSET, Response, Unset


def _get_kwargs(
    namespace: str,
    name: str,
    *,
    phase: str | Unset = UNSET,
    condition: str | Unset = UNSET,
    deleted: bool | Unset = UNSET,
    timeout_seconds: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["phase"] = phase

    params["condition"] = condition

    params["deleted"] = deleted

    params["timeoutSeconds"] = timeout_seconds

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/templates/{namespace}/{name}/wait".format(
            namespace=quote(str(namespace), safe=""),
            name=quote(str(name), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | KaironTemplate | None:
    if response.status_code == 200:
        response_200 = KaironTemplate.from_dict(response.json())

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

    if response.status_code == 429:
        response_429 = ErrorBody.from_dict(response.json())

        return response_429

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
) -> Response[ErrorBody | KaironTemplate]:
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
    phase: str | Unset = UNSET,
    condition: str | Unset = UNSET,
    deleted: bool | Unset = UNSET,
    timeout_seconds: int | Unset = UNSET,
) -> Response[ErrorBody | KaironTemplate]:
    """
    Args:
        namespace (str):
        name (str):
        phase (str | Unset):
        condition (str | Unset):
        deleted (bool | Unset):
        timeout_seconds (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | KaironTemplate]
    """

    kwargs = _get_kwargs(
        namespace=namespace,
        name=name,
        phase=phase,
        condition=condition,
        deleted=deleted,
        timeout_seconds=timeout_seconds,
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
    phase: str | Unset = UNSET,
    condition: str | Unset = UNSET,
    deleted: bool | Unset = UNSET,
    timeout_seconds: int | Unset = UNSET,
) -> ErrorBody | KaironTemplate | None:
    """
    Args:
        namespace (str):
        name (str):
        phase (str | Unset):
        condition (str | Unset):
        deleted (bool | Unset):
        timeout_seconds (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | KaironTemplate
    """

    return sync_detailed(
        namespace=namespace,
        name=name,
        client=client,
        phase=phase,
        condition=condition,
        deleted=deleted,
        timeout_seconds=timeout_seconds,
    ).parsed


async def asyncio_detailed(
    namespace: str,
    name: str,
    *,
    client: AuthenticatedClient | Client,
    phase: str | Unset = UNSET,
    condition: str | Unset = UNSET,
    deleted: bool | Unset = UNSET,
    timeout_seconds: int | Unset = UNSET,
) -> Response[ErrorBody | KaironTemplate]:
    """
    Args:
        namespace (str):
        name (str):
        phase (str | Unset):
        condition (str | Unset):
        deleted (bool | Unset):
        timeout_seconds (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | KaironTemplate]
    """

    kwargs = _get_kwargs(
        namespace=namespace,
        name=name,
        phase=phase,
        condition=condition,
        deleted=deleted,
        timeout_seconds=timeout_seconds,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    namespace: str,
    name: str,
    *,
    client: AuthenticatedClient | Client,
    phase: str | Unset = UNSET,
    condition: str | Unset = UNSET,
    deleted: bool | Unset = UNSET,
    timeout_seconds: int | Unset = UNSET,
) -> ErrorBody | KaironTemplate | None:
    """
    Args:
        namespace (str):
        name (str):
        phase (str | Unset):
        condition (str | Unset):
        deleted (bool | Unset):
        timeout_seconds (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | KaironTemplate
    """

    return (
        await asyncio_detailed(
            namespace=namespace,
            name=name,
            client=client,
            phase=phase,
            condition=condition,
            deleted=deleted,
            timeout_seconds=timeout_seconds,
        )
    ).parsed
