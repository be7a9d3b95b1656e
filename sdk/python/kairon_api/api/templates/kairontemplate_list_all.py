from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.kairon_template_list import KaironTemplateList
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    label_selector: str | Unset = UNSET,
    watch: bool | Unset = UNSET,
    resource_version: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["labelSelector"] = label_selector

    params["watch"] = watch

    params["resourceVersion"] = resource_version

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/templates",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | KaironTemplateList | None:
    if response.status_code == 200:
        response_200 = KaironTemplateList.from_dict(response.json())

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

    if response.status_code == 429:
        response_429 = ErrorBody.from_dict(response.json())

        return response_429

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | KaironTemplateList]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    label_selector: str | Unset = UNSET,
    watch: bool | Unset = UNSET,
    resource_version: str | Unset = UNSET,
) -> Response[ErrorBody | KaironTemplateList]:
    """
    Args:
        label_selector (str | Unset):
        watch (bool | Unset):
        resource_version (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | KaironTemplateList]
    """

    kwargs = _get_kwargs(
        label_selector=label_selector,
        watch=watch,
        resource_version=resource_version,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    label_selector: str | Unset = UNSET,
    watch: bool | Unset = UNSET,
    resource_version: str | Unset = UNSET,
) -> ErrorBody | KaironTemplateList | None:
    """
    Args:
        label_selector (str | Unset):
        watch (bool | Unset):
        resource_version (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | KaironTemplateList
    """

    return sync_detailed(
        client=client,
        label_selector=label_selector,
        watch=watch,
        resource_version=resource_version,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    label_selector: str | Unset = UNSET,
    watch: bool | Unset = UNSET,
    resource_version: str | Unset = UNSET,
) -> Response[ErrorBody | KaironTemplateList]:
    """
    Args:
        label_selector (str | Unset):
        watch (bool | Unset):
        resource_version (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | KaironTemplateList]
    """

    kwargs = _get_kwargs(
        label_selector=label_selector,
        watch=watch,
        resource_version=resource_version,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    label_selector: str | Unset = UNSET,
    watch: bool | Unset = UNSET,
    resource_version: str | Unset = UNSET,
) -> ErrorBody | KaironTemplateList | None:
    """
    Args:
        label_selector (str | Unset):
        watch (bool | Unset):
        resource_version (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | KaironTemplateList
    """

    return (
        await asyncio_detailed(
            client=client,
            label_selector=label_selector,
            watch=watch,
            resource_version=resource_version,
        )
    ).parsed
