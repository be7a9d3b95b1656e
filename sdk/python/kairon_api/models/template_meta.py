from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.template_meta_annotations import TemplateMetaAnnotations
    from ..models.template_meta_labels import TemplateMetaLabels


T = TypeVar("T", bound="TemplateMeta")


@_attrs_define
class TemplateMeta:
    """Labels and annotations copied onto every member.

    Attributes:
        annotations (TemplateMetaAnnotations | Unset):
        labels (TemplateMetaLabels | Unset):
    """

    annotations: TemplateMetaAnnotations | Unset = UNSET
    labels: TemplateMetaLabels | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        annotations: dict[str, Any] | Unset = UNSET
        if not isinstance(self.annotations, Unset):
            annotations = self.annotations.to_dict()

        labels: dict[str, Any] | Unset = UNSET
        if not isinstance(self.labels, Unset):
            labels = self.labels.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if annotations is not UNSET:
            field_dict["annotations"] = annotations
        if labels is not UNSET:
            field_dict["labels"] = labels

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.template_meta_annotations import TemplateMetaAnnotations
        from ..models.template_meta_labels import TemplateMetaLabels

        d = dict(src_dict)
        _annotations = d.pop("annotations", UNSET)
        annotations: TemplateMetaAnnotations | Unset
        if isinstance(_annotations, Unset):
            annotations = UNSET
        else:
            annotations = TemplateMetaAnnotations.from_dict(_annotations)

        _labels = d.pop("labels", UNSET)
        labels: TemplateMetaLabels | Unset
        if isinstance(_labels, Unset):
            labels = UNSET
        else:
            labels = TemplateMetaLabels.from_dict(_labels)

        template_meta = cls(
            annotations=annotations,
            labels=labels,
        )

        template_meta.additional_properties = d
        return template_meta

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
