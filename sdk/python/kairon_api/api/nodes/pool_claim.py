from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.pool_claim_request import PoolClaimRequest
from ...models.pool_claim_result import PoolClaimResult
from ...models.vm import Vm
from ...types import Response


def _get_kwargs(
    node: str,
    item: str,
    *,
    body: PoolClaimRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/nodes/{node}/pools/{item}/claim".format(
            node=quote(str(node), safe=""),
            item=quote(str(item), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | PoolClaimResult | Vm | None:
    if response.status_code == 200:

        def _parse_response_200(data: object) -> PoolClaimResult | Vm:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_pool_claim_type_0 = PoolClaimResult.from_dict(data)

                return componentsschemas_pool_claim_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            componentsschemas_pool_claim_type_1 = Vm.from_dict(data)

            return componentsschemas_pool_claim_type_1

        response_200 = _parse_response_200(response.json())

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

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = ErrorBody.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = ErrorBody.from_dict(response.json())

        return response_422

    if response.status_code == 502:
        response_502 = ErrorBody.from_dict(response.json())

        return response_502

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | PoolClaimResult | Vm]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    node: str,
    item: str,
    *,
    client: AuthenticatedClient | Client,
    body: PoolClaimRequest,
) -> Response[ErrorBody | PoolClaimResult | Vm]:
    """Take one ready member, resumed (admin-only). Fails at once when none is ready. With
    `createMachine` it answers `{vm, machine}` (or `{vm, machine: null, machineError}`), else the VM.

    Args:
        node (str):
        item (str):
        body (PoolClaimRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | PoolClaimResult | Vm]
    """

    kwargs = _get_kwargs(
        node=node,
        item=item,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    node: str,
    item: str,
    *,
    client: AuthenticatedClient | Client,
    body: PoolClaimRequest,
) -> ErrorBody | PoolClaimResult | Vm | None:
    """Take one ready member, resumed (admin-only). Fails at once when none is ready. With
    `createMachine` it answers `{vm, machine}` (or `{vm, machine: null, machineError}`), else the VM.

    Args:
        node (str):
        item (str):
        body (PoolClaimRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | PoolClaimResult | Vm
    """

    return sync_detailed(
        node=node,
        item=item,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    node: str,
    item: str,
    *,
    client: AuthenticatedClient | Client,
    body: PoolClaimRequest,
) -> Response[ErrorBody | PoolClaimResult | Vm]:
    """Take one ready member, resumed (admin-only). Fails at once when none is ready. With
    `createMachine` it answers `{vm, machine}` (or `{vm, machine: null, machineError}`), else the VM.

    Args:
        node (str):
        item (str):
        body (PoolClaimRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | PoolClaimResult | Vm]
    """

    kwargs = _get_kwargs(
        node=node,
        item=item,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    node: str,
    item: str,
    *,
    client: AuthenticatedClient | Client,
    body: PoolClaimRequest,
) -> ErrorBody | PoolClaimResult | Vm | None:
    """Take one ready member, resumed (admin-only). Fails at once when none is ready. With
    `createMachine` it answers `{vm, machine}` (or `{vm, machine: null, machineError}`), else the VM.

    Args:
        node (str):
        item (str):
        body (PoolClaimRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | PoolClaimResult | Vm
    """

    return (
        await asyncio_detailed(
            node=node,
            item=item,
            client=client,
            body=body,
        )
    ).parsed
