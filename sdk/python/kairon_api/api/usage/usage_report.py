from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.usage_report import UsageReport
from ...models.usage_report_group_by import UsageReportGroupBy
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    from_: str | Unset = UNSET,
    to: str | Unset = UNSET,
    group_by: UsageReportGroupBy | Unset = UNSET,
    namespace: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["from"] = from_

    params["to"] = to

    json_group_by: str | Unset = UNSET
    if not isinstance(group_by, Unset):
        json_group_by = group_by.value

    params["groupBy"] = json_group_by

    params["namespace"] = namespace

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/usage",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | UsageReport | None:
    if response.status_code == 200:
        response_200 = UsageReport.from_dict(response.json())

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

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | UsageReport]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    from_: str | Unset = UNSET,
    to: str | Unset = UNSET,
    group_by: UsageReportGroupBy | Unset = UNSET,
    namespace: str | Unset = UNSET,
) -> Response[ErrorBody | UsageReport]:
    """Usage totals over a range of UTC days, by namespace, claim or day.

    Args:
        from_ (str | Unset): A UTC day, YYYY-MM-DD (days 29 to 31 are valid too where the month
            has them)
        to (str | Unset): A UTC day, YYYY-MM-DD (days 29 to 31 are valid too where the month has
            them)
        group_by (UsageReportGroupBy | Unset):
        namespace (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | UsageReport]
    """

    kwargs = _get_kwargs(
        from_=from_,
        to=to,
        group_by=group_by,
        namespace=namespace,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    from_: str | Unset = UNSET,
    to: str | Unset = UNSET,
    group_by: UsageReportGroupBy | Unset = UNSET,
    namespace: str | Unset = UNSET,
) -> ErrorBody | UsageReport | None:
    """Usage totals over a range of UTC days, by namespace, claim or day.

    Args:
        from_ (str | Unset): A UTC day, YYYY-MM-DD (days 29 to 31 are valid too where the month
            has them)
        to (str | Unset): A UTC day, YYYY-MM-DD (days 29 to 31 are valid too where the month has
            them)
        group_by (UsageReportGroupBy | Unset):
        namespace (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | UsageReport
    """

    return sync_detailed(
        client=client,
        from_=from_,
        to=to,
        group_by=group_by,
        namespace=namespace,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    from_: str | Unset = UNSET,
    to: str | Unset = UNSET,
    group_by: UsageReportGroupBy | Unset = UNSET,
    namespace: str | Unset = UNSET,
) -> Response[ErrorBody | UsageReport]:
    """Usage totals over a range of UTC days, by namespace, claim or day.

    Args:
        from_ (str | Unset): A UTC day, YYYY-MM-DD (days 29 to 31 are valid too where the month
            has them)
        to (str | Unset): A UTC day, YYYY-MM-DD (days 29 to 31 are valid too where the month has
            them)
        group_by (UsageReportGroupBy | Unset):
        namespace (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | UsageReport]
    """

    kwargs = _get_kwargs(
        from_=from_,
        to=to,
        group_by=group_by,
        namespace=namespace,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    from_: str | Unset = UNSET,
    to: str | Unset = UNSET,
    group_by: UsageReportGroupBy | Unset = UNSET,
    namespace: str | Unset = UNSET,
) -> ErrorBody | UsageReport | None:
    """Usage totals over a range of UTC days, by namespace, claim or day.

    Args:
        from_ (str | Unset): A UTC day, YYYY-MM-DD (days 29 to 31 are valid too where the month
            has them)
        to (str | Unset): A UTC day, YYYY-MM-DD (days 29 to 31 are valid too where the month has
            them)
        group_by (UsageReportGroupBy | Unset):
        namespace (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | UsageReport
    """

    return (
        await asyncio_detailed(
            client=client,
            from_=from_,
            to=to,
            group_by=group_by,
            namespace=namespace,
        )
    ).parsed
