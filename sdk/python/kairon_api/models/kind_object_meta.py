from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.object_meta_annotations_type_0 import ObjectMetaAnnotationsType0
    from ..models.object_meta_labels_type_0 import ObjectMetaLabelsType0
    from ..models.object_meta_owner_references_type_0_item import (
        ObjectMetaOwnerReferencesType0Item,
    )


T = TypeVar("T", bound="KindObjectMeta")


@_attrs_define
class KindObjectMeta:
    """The metadata of a Machine, MachinePool, MachineClaim or KaironTemplate: its name is a DNS label, and required

    Attributes:
        name (str):
        annotations (None | ObjectMetaAnnotationsType0 | Unset):
        creation_timestamp (datetime.datetime | None | Unset):
        deletion_timestamp (datetime.datetime | None | Unset):
        finalizers (list[str] | None | Unset):
        generation (int | None | Unset):
        labels (None | ObjectMetaLabelsType0 | Unset):
        namespace (None | str | Unset):
        owner_references (list[ObjectMetaOwnerReferencesType0Item] | None | Unset):
        resource_version (None | str | Unset):
        uid (None | str | Unset):
    """

    name: str
    annotations: None | ObjectMetaAnnotationsType0 | Unset = UNSET
    creation_timestamp: datetime.datetime | None | Unset = UNSET
    deletion_timestamp: datetime.datetime | None | Unset = UNSET
    finalizers: list[str] | None | Unset = UNSET
    generation: int | None | Unset = UNSET
    labels: None | ObjectMetaLabelsType0 | Unset = UNSET
    namespace: None | str | Unset = UNSET
    owner_references: list[ObjectMetaOwnerReferencesType0Item] | None | Unset = UNSET
    resource_version: None | str | Unset = UNSET
    uid: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.object_meta_annotations_type_0 import ObjectMetaAnnotationsType0
        from ..models.object_meta_labels_type_0 import ObjectMetaLabelsType0

        name = self.name

        annotations: dict[str, Any] | None | Unset
        if isinstance(self.annotations, Unset):
            annotations = UNSET
        elif isinstance(self.annotations, ObjectMetaAnnotationsType0):
            annotations = self.annotations.to_dict()
        else:
            annotations = self.annotations

        creation_timestamp: None | str | Unset
        if isinstance(self.creation_timestamp, Unset):
            creation_timestamp = UNSET
        elif isinstance(self.creation_timestamp, datetime.datetime):
            creation_timestamp = self.creation_timestamp.isoformat()
        else:
            creation_timestamp = self.creation_timestamp

        deletion_timestamp: None | str | Unset
        if isinstance(self.deletion_timestamp, Unset):
            deletion_timestamp = UNSET
        elif isinstance(self.deletion_timestamp, datetime.datetime):
            deletion_timestamp = self.deletion_timestamp.isoformat()
        else:
            deletion_timestamp = self.deletion_timestamp

        finalizers: list[str] | None | Unset
        if isinstance(self.finalizers, Unset):
            finalizers = UNSET
        elif isinstance(self.finalizers, list):
            finalizers = self.finalizers

        else:
            finalizers = self.finalizers

        generation: int | None | Unset
        if isinstance(self.generation, Unset):
            generation = UNSET
        else:
            generation = self.generation

        labels: dict[str, Any] | None | Unset
        if isinstance(self.labels, Unset):
            labels = UNSET
        elif isinstance(self.labels, ObjectMetaLabelsType0):
            labels = self.labels.to_dict()
        else:
            labels = self.labels

        namespace: None | str | Unset
        if isinstance(self.namespace, Unset):
            namespace = UNSET
        else:
            namespace = self.namespace

        owner_references: list[dict[str, Any]] | None | Unset
        if isinstance(self.owner_references, Unset):
            owner_references = UNSET
        elif isinstance(self.owner_references, list):
            owner_references = []
            for owner_references_type_0_item_data in self.owner_references:
                owner_references_type_0_item = (
                    owner_references_type_0_item_data.to_dict()
                )
                owner_references.append(owner_references_type_0_item)

        else:
            owner_references = self.owner_references

        resource_version: None | str | Unset
        if isinstance(self.resource_version, Unset):
            resource_version = UNSET
        else:
            resource_version = self.resource_version

        uid: None | str | Unset
        if isinstance(self.uid, Unset):
            uid = UNSET
        else:
            uid = self.uid

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
            }
        )
        if annotations is not UNSET:
            field_dict["annotations"] = annotations
        if creation_timestamp is not UNSET:
            field_dict["creationTimestamp"] = creation_timestamp
        if deletion_timestamp is not UNSET:
            field_dict["deletionTimestamp"] = deletion_timestamp
        if finalizers is not UNSET:
            field_dict["finalizers"] = finalizers
        if generation is not UNSET:
            field_dict["generation"] = generation
        if labels is not UNSET:
            field_dict["labels"] = labels
        if namespace is not UNSET:
            field_dict["namespace"] = namespace
        if owner_references is not UNSET:
            field_dict["ownerReferences"] = owner_references
        if resource_version is not UNSET:
            field_dict["resourceVersion"] = resource_version
        if uid is not UNSET:
            field_dict["uid"] = uid

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.object_meta_annotations_type_0 import ObjectMetaAnnotationsType0
        from ..models.object_meta_labels_type_0 import ObjectMetaLabelsType0
        from ..models.object_meta_owner_references_type_0_item import (
            ObjectMetaOwnerReferencesType0Item,
        )

        d = dict(src_dict)
        name = d.pop("name")

        def _parse_annotations(
            data: object,
        ) -> None | ObjectMetaAnnotationsType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                annotations_type_0 = ObjectMetaAnnotationsType0.from_dict(data)

                return annotations_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ObjectMetaAnnotationsType0 | Unset, data)

        annotations = _parse_annotations(d.pop("annotations", UNSET))

        def _parse_creation_timestamp(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                creation_timestamp_type_0 = datetime.datetime.fromisoformat(data)

                return creation_timestamp_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        creation_timestamp = _parse_creation_timestamp(
            d.pop("creationTimestamp", UNSET)
        )

        def _parse_deletion_timestamp(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                deletion_timestamp_type_0 = datetime.datetime.fromisoformat(data)

                return deletion_timestamp_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        deletion_timestamp = _parse_deletion_timestamp(
            d.pop("deletionTimestamp", UNSET)
        )

        def _parse_finalizers(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                finalizers_type_0 = cast(list[str], data)

                return finalizers_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        finalizers = _parse_finalizers(d.pop("finalizers", UNSET))

        def _parse_generation(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        generation = _parse_generation(d.pop("generation", UNSET))

        def _parse_labels(data: object) -> None | ObjectMetaLabelsType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                labels_type_0 = ObjectMetaLabelsType0.from_dict(data)

                return labels_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ObjectMetaLabelsType0 | Unset, data)

        labels = _parse_labels(d.pop("labels", UNSET))

        def _parse_namespace(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        namespace = _parse_namespace(d.pop("namespace", UNSET))

        def _parse_owner_references(
            data: object,
        ) -> list[ObjectMetaOwnerReferencesType0Item] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                owner_references_type_0 = []
                _owner_references_type_0 = data
                for owner_references_type_0_item_data in _owner_references_type_0:
                    owner_references_type_0_item = (
                        ObjectMetaOwnerReferencesType0Item.from_dict(
                            owner_references_type_0_item_data
                        )
                    )

                    owner_references_type_0.append(owner_references_type_0_item)

                return owner_references_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[ObjectMetaOwnerReferencesType0Item] | None | Unset, data)

        owner_references = _parse_owner_references(d.pop("ownerReferences", UNSET))

        def _parse_resource_version(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        resource_version = _parse_resource_version(d.pop("resourceVersion", UNSET))

        def _parse_uid(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        uid = _parse_uid(d.pop("uid", UNSET))

        kind_object_meta = cls(
            name=name,
            annotations=annotations,
            creation_timestamp=creation_timestamp,
            deletion_timestamp=deletion_timestamp,
            finalizers=finalizers,
            generation=generation,
            labels=labels,
            namespace=namespace,
            owner_references=owner_references,
            resource_version=resource_version,
            uid=uid,
        )

        kind_object_meta.additional_properties = d
        return kind_object_meta

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
