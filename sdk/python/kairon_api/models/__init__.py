"""Contains all the data models used in inputs/outputs"""

from .acceleration import Acceleration
from .backend import Backend
from .claim_phase import ClaimPhase
from .claim_usage import ClaimUsage
from .claim_usage_history import ClaimUsageHistory
from .condition import Condition
from .copy_request import CopyRequest
from .copy_result import CopyResult
from .create_pool_request import CreatePoolRequest
from .create_template_request import CreateTemplateRequest
from .create_vm_request import CreateVmRequest
from .create_vm_request_labels import CreateVmRequestLabels
from .device_claim import DeviceClaim
from .egress_check_body import EgressCheckBody
from .egress_check_result import EgressCheckResult
from .egress_mode import EgressMode
from .egress_spec import EgressSpec
from .error_body import ErrorBody
from .event import Event
from .event_list import EventList
from .event_regarding import EventRegarding
from .event_series import EventSeries
from .exec_request import ExecRequest
from .exec_request_env import ExecRequestEnv
from .exec_result import ExecResult
from .extend_request import ExtendRequest
from .extended import Extended
from .file_entry import FileEntry
from .file_event import FileEvent
from .guest_agent import GuestAgent
from .hugepages import Hugepages
from .hugepages_page_size import HugepagesPageSize
from .idle_action import IdleAction
from .image_config import ImageConfig
from .image_source import ImageSource
from .kairon_node import KaironNode
from .kairon_node_list import KaironNodeList
from .kairon_node_spec import KaironNodeSpec
from .kairon_node_status import KaironNodeStatus
from .kairon_node_watch_event import KaironNodeWatchEvent
from .kairon_template import KaironTemplate
from .kairon_template_api_version import KaironTemplateApiVersion
from .kairon_template_kind import KaironTemplateKind
from .kairon_template_list import KaironTemplateList
from .kairon_template_spec import KaironTemplateSpec
from .kairon_template_status import KaironTemplateStatus
from .kairon_template_watch_event import KaironTemplateWatchEvent
from .kairontemplate_create_dry_run import KairontemplateCreateDryRun
from .kairontemplate_delete_dry_run import KairontemplateDeleteDryRun
from .kairontemplate_replace_dry_run import KairontemplateReplaceDryRun
from .kernel_spec import KernelSpec
from .kind_object_meta import KindObjectMeta
from .launch_type import LaunchType
from .lifecycle import Lifecycle
from .lifecycle_status import LifecycleStatus
from .machine import Machine
from .machine_api_version import MachineApiVersion
from .machine_claim import MachineClaim
from .machine_claim_api_version import MachineClaimApiVersion
from .machine_claim_kind import MachineClaimKind
from .machine_claim_list import MachineClaimList
from .machine_claim_spec import MachineClaimSpec
from .machine_claim_spec_env import MachineClaimSpecEnv
from .machine_claim_spec_secret_env import MachineClaimSpecSecretEnv
from .machine_claim_status import MachineClaimStatus
from .machine_claim_watch_event import MachineClaimWatchEvent
from .machine_create_dry_run import MachineCreateDryRun
from .machine_delete_dry_run import MachineDeleteDryRun
from .machine_extend_dry_run import MachineExtendDryRun
from .machine_halt_dry_run import MachineHaltDryRun
from .machine_hibernate_dry_run import MachineHibernateDryRun
from .machine_kind import MachineKind
from .machine_list import MachineList
from .machine_metrics import MachineMetrics
from .machine_migrate_dry_run import MachineMigrateDryRun
from .machine_pause_dry_run import MachinePauseDryRun
from .machine_phase import MachinePhase
from .machine_pool import MachinePool
from .machine_pool_api_version import MachinePoolApiVersion
from .machine_pool_kind import MachinePoolKind
from .machine_pool_list import MachinePoolList
from .machine_pool_spec import MachinePoolSpec
from .machine_pool_status import MachinePoolStatus
from .machine_pool_watch_event import MachinePoolWatchEvent
from .machine_replace_dry_run import MachineReplaceDryRun
from .machine_restart_dry_run import MachineRestartDryRun
from .machine_resume_dry_run import MachineResumeDryRun
from .machine_set_timeout_dry_run import MachineSetTimeoutDryRun
from .machine_spec import MachineSpec
from .machine_spec_env import MachineSpecEnv
from .machine_spec_secret_env import MachineSpecSecretEnv
from .machine_start_dry_run import MachineStartDryRun
from .machine_status import MachineStatus
from .machine_stop_dry_run import MachineStopDryRun
from .machine_template import MachineTemplate
from .machine_watch_event import MachineWatchEvent
from .machineclaim_create_dry_run import MachineclaimCreateDryRun
from .machineclaim_delete_dry_run import MachineclaimDeleteDryRun
from .machineclaim_replace_dry_run import MachineclaimReplaceDryRun
from .machinepool_create_dry_run import MachinepoolCreateDryRun
from .machinepool_delete_dry_run import MachinepoolDeleteDryRun
from .machinepool_replace_dry_run import MachinepoolReplaceDryRun
from .migration import Migration
from .migration_mode import MigrationMode
from .migration_plan import MigrationPlan
from .migration_status import MigrationStatus
from .network_mode import NetworkMode
from .network_spec import NetworkSpec
from .node_backend import NodeBackend
from .node_capacity import NodeCapacity
from .node_fit import NodeFit
from .numa_spec import NumaSpec
from .object_meta import ObjectMeta
from .object_meta_annotations_type_0 import ObjectMetaAnnotationsType0
from .object_meta_labels_type_0 import ObjectMetaLabelsType0
from .object_meta_owner_references_type_0_item import ObjectMetaOwnerReferencesType0Item
from .pool import Pool
from .pool_autoscale import PoolAutoscale
from .pool_claim_request import PoolClaimRequest
from .pool_claim_result import PoolClaimResult
from .pool_member import PoolMember
from .pool_member_state import PoolMemberState
from .power_state import PowerState
from .preview import Preview
from .preview_request import PreviewRequest
from .process import Process
from .process_event_type_0 import ProcessEventType0
from .process_event_type_0_type import ProcessEventType0Type
from .process_event_type_1 import ProcessEventType1
from .process_event_type_1_type import ProcessEventType1Type
from .process_event_type_2 import ProcessEventType2
from .process_event_type_2_type import ProcessEventType2Type
from .process_event_type_3 import ProcessEventType3
from .process_event_type_3_type import ProcessEventType3Type
from .process_kill_signal import ProcessKillSignal
from .process_logs import ProcessLogs
from .process_state import ProcessState
from .quota_amounts import QuotaAmounts
from .quota_limit import QuotaLimit
from .quota_report import QuotaReport
from .reason import Reason
from .redacted_sandbox import RedactedSandbox
from .rename_request import RenameRequest
from .resources import Resources
from .runtime_spec import RuntimeSpec
from .sandbox_spec import SandboxSpec
from .secret_key_ref import SecretKeyRef
from .snapshot_request import SnapshotRequest
from .snapshot_result import SnapshotResult
from .template import Template
from .template_meta import TemplateMeta
from .template_meta_annotations import TemplateMetaAnnotations
from .template_meta_labels import TemplateMetaLabels
from .template_node_build import TemplateNodeBuild
from .template_phase import TemplatePhase
from .template_state import TemplateState
from .ticket import Ticket
from .ticket_request import TicketRequest
from .timeout_request import TimeoutRequest
from .totals import Totals
from .usage_interval_row import UsageIntervalRow
from .usage_report import UsageReport
from .usage_report_group_by import UsageReportGroupBy
from .usage_row import UsageRow
from .vm import Vm
from .vm_state import VmState
from .volume import Volume
from .warm_power_state import WarmPowerState
from .watch_event_type import WatchEventType
from .whoami import Whoami
from .whoami_role import WhoamiRole

__all__ = (
    "Acceleration",
    "Backend",
    "ClaimPhase",
    "ClaimUsage",
    "ClaimUsageHistory",
    "Condition",
    "CopyRequest",
    "CopyResult",
    "CreatePoolRequest",
    "CreateTemplateRequest",
    "CreateVmRequest",
    "CreateVmRequestLabels",
    "DeviceClaim",
    "EgressCheckBody",
    "EgressCheckResult",
    "EgressMode",
    "EgressSpec",
    "ErrorBody",
    "Event",
    "EventList",
    "EventRegarding",
    "EventSeries",
    "ExecRequest",
    "ExecRequestEnv",
    "ExecResult",
    "ExtendRequest",
    "Extended",
    "FileEntry",
    "FileEvent",
    "GuestAgent",
    "Hugepages",
    "HugepagesPageSize",
    "IdleAction",
    "ImageConfig",
    "ImageSource",
    "KaironNode",
    "KaironNodeList",
    "KaironNodeSpec",
    "KaironNodeStatus",
    "KaironNodeWatchEvent",
    "KaironTemplate",
    "KaironTemplateApiVersion",
    "KaironTemplateKind",
    "KaironTemplateList",
    "KaironTemplateSpec",
    "KaironTemplateStatus",
    "KaironTemplateWatchEvent",
    "KairontemplateCreateDryRun",
    "KairontemplateDeleteDryRun",
    "KairontemplateReplaceDryRun",
    "KernelSpec",
    "KindObjectMeta",
    "LaunchType",
    "Lifecycle",
    "LifecycleStatus",
    "Machine",
    "MachineApiVersion",
    "MachineClaim",
    "MachineClaimApiVersion",
    "MachineClaimKind",
    "MachineClaimList",
    "MachineClaimSpec",
    "MachineClaimSpecEnv",
    "MachineClaimSpecSecretEnv",
    "MachineClaimStatus",
    "MachineClaimWatchEvent",
    "MachineCreateDryRun",
    "MachineDeleteDryRun",
    "MachineExtendDryRun",
    "MachineHaltDryRun",
    "MachineHibernateDryRun",
    "MachineKind",
    "MachineList",
    "MachineMetrics",
    "MachineMigrateDryRun",
    "MachinePauseDryRun",
    "MachinePhase",
    "MachinePool",
    "MachinePoolApiVersion",
    "MachinePoolKind",
    "MachinePoolList",
    "MachinePoolSpec",
    "MachinePoolStatus",
    "MachinePoolWatchEvent",
    "MachineReplaceDryRun",
    "MachineRestartDryRun",
    "MachineResumeDryRun",
    "MachineSetTimeoutDryRun",
    "MachineSpec",
    "MachineSpecEnv",
    "MachineSpecSecretEnv",
    "MachineStartDryRun",
    "MachineStatus",
    "MachineStopDryRun",
    "MachineTemplate",
    "MachineWatchEvent",
    "MachineclaimCreateDryRun",
    "MachineclaimDeleteDryRun",
    "MachineclaimReplaceDryRun",
    "MachinepoolCreateDryRun",
    "MachinepoolDeleteDryRun",
    "MachinepoolReplaceDryRun",
    "Migration",
    "MigrationMode",
    "MigrationPlan",
    "MigrationStatus",
    "NetworkMode",
    "NetworkSpec",
    "NodeBackend",
    "NodeCapacity",
    "NodeFit",
    "NumaSpec",
    "ObjectMeta",
    "ObjectMetaAnnotationsType0",
    "ObjectMetaLabelsType0",
    "ObjectMetaOwnerReferencesType0Item",
    "Pool",
    "PoolAutoscale",
    "PoolClaimRequest",
    "PoolClaimResult",
    "PoolMember",
    "PoolMemberState",
    "PowerState",
    "Preview",
    "PreviewRequest",
    "Process",
    "ProcessEventType0",
    "ProcessEventType0Type",
    "ProcessEventType1",
    "ProcessEventType1Type",
    "ProcessEventType2",
    "ProcessEventType2Type",
    "ProcessEventType3",
    "ProcessEventType3Type",
    "ProcessKillSignal",
    "ProcessLogs",
    "ProcessState",
    "QuotaAmounts",
    "QuotaLimit",
    "QuotaReport",
    "Reason",
    "RedactedSandbox",
    "RenameRequest",
    "Resources",
    "RuntimeSpec",
    "SandboxSpec",
    "SecretKeyRef",
    "SnapshotRequest",
    "SnapshotResult",
    "Template",
    "TemplateMeta",
    "TemplateMetaAnnotations",
    "TemplateMetaLabels",
    "TemplateNodeBuild",
    "TemplatePhase",
    "TemplateState",
    "Ticket",
    "TicketRequest",
    "TimeoutRequest",
    "Totals",
    "UsageIntervalRow",
    "UsageReport",
    "UsageReportGroupBy",
    "UsageRow",
    "Vm",
    "VmState",
    "Volume",
    "WarmPowerState",
    "WatchEventType",
    "Whoami",
    "WhoamiRole",
)
