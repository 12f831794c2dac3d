from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NodeAddress(_message.Message):
    __slots__ = ("type", "address")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    type: str
    address: str
    def __init__(self, type: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class CreateMachineRequest(_message.Message):
    __slots__ = ("machine_json", "machine_class_json", "secret_data")
    class SecretDataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    MACHINE_JSON_FIELD_NUMBER: _ClassVar[int]
    MACHINE_CLASS_JSON_FIELD_NUMBER: _ClassVar[int]
    SECRET_DATA_FIELD_NUMBER: _ClassVar[int]
    machine_json: bytes
    machine_class_json: bytes
    secret_data: _containers.ScalarMap[str, bytes]
    def __init__(self, machine_json: _Optional[bytes] = ..., machine_class_json: _Optional[bytes] = ..., secret_data: _Optional[_Mapping[str, bytes]] = ...) -> None: ...

class CreateMachineResponse(_message.Message):
    __slots__ = ("provider_id", "node_name", "last_known_state", "addresses")
    PROVIDER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    LAST_KNOWN_STATE_FIELD_NUMBER: _ClassVar[int]
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    provider_id: str
    node_name: str
    last_known_state: str
    addresses: _containers.RepeatedCompositeFieldContainer[NodeAddress]
    def __init__(self, provider_id: _Optional[str] = ..., node_name: _Optional[str] = ..., last_known_state: _Optional[str] = ..., addresses: _Optional[_Iterable[_Union[NodeAddress, _Mapping]]] = ...) -> None: ...

class InitializeMachineRequest(_message.Message):
    __slots__ = ("machine_json", "machine_class_json", "secret_data")
    class SecretDataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    MACHINE_JSON_FIELD_NUMBER: _ClassVar[int]
    MACHINE_CLASS_JSON_FIELD_NUMBER: _ClassVar[int]
    SECRET_DATA_FIELD_NUMBER: _ClassVar[int]
    machine_json: bytes
    machine_class_json: bytes
    secret_data: _containers.ScalarMap[str, bytes]
    def __init__(self, machine_json: _Optional[bytes] = ..., machine_class_json: _Optional[bytes] = ..., secret_data: _Optional[_Mapping[str, bytes]] = ...) -> None: ...

class InitializeMachineResponse(_message.Message):
    __slots__ = ("provider_id", "node_name", "addresses")
    PROVIDER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    provider_id: str
    node_name: str
    addresses: _containers.RepeatedCompositeFieldContainer[NodeAddress]
    def __init__(self, provider_id: _Optional[str] = ..., node_name: _Optional[str] = ..., addresses: _Optional[_Iterable[_Union[NodeAddress, _Mapping]]] = ...) -> None: ...

class DeleteMachineRequest(_message.Message):
    __slots__ = ("machine_json", "machine_class_json", "secret_data")
    class SecretDataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    MACHINE_JSON_FIELD_NUMBER: _ClassVar[int]
    MACHINE_CLASS_JSON_FIELD_NUMBER: _ClassVar[int]
    SECRET_DATA_FIELD_NUMBER: _ClassVar[int]
    machine_json: bytes
    machine_class_json: bytes
    secret_data: _containers.ScalarMap[str, bytes]
    def __init__(self, machine_json: _Optional[bytes] = ..., machine_class_json: _Optional[bytes] = ..., secret_data: _Optional[_Mapping[str, bytes]] = ...) -> None: ...

class DeleteMachineResponse(_message.Message):
    __slots__ = ("last_known_state",)
    LAST_KNOWN_STATE_FIELD_NUMBER: _ClassVar[int]
    last_known_state: str
    def __init__(self, last_known_state: _Optional[str] = ...) -> None: ...

class GetMachineStatusRequest(_message.Message):
    __slots__ = ("machine_json", "machine_class_json", "secret_data")
    class SecretDataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    MACHINE_JSON_FIELD_NUMBER: _ClassVar[int]
    MACHINE_CLASS_JSON_FIELD_NUMBER: _ClassVar[int]
    SECRET_DATA_FIELD_NUMBER: _ClassVar[int]
    machine_json: bytes
    machine_class_json: bytes
    secret_data: _containers.ScalarMap[str, bytes]
    def __init__(self, machine_json: _Optional[bytes] = ..., machine_class_json: _Optional[bytes] = ..., secret_data: _Optional[_Mapping[str, bytes]] = ...) -> None: ...

class GetMachineStatusResponse(_message.Message):
    __slots__ = ("provider_id", "node_name", "addresses")
    PROVIDER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    provider_id: str
    node_name: str
    addresses: _containers.RepeatedCompositeFieldContainer[NodeAddress]
    def __init__(self, provider_id: _Optional[str] = ..., node_name: _Optional[str] = ..., addresses: _Optional[_Iterable[_Union[NodeAddress, _Mapping]]] = ...) -> None: ...

class ListMachinesRequest(_message.Message):
    __slots__ = ("machine_class_json", "secret_data")
    class SecretDataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    MACHINE_CLASS_JSON_FIELD_NUMBER: _ClassVar[int]
    SECRET_DATA_FIELD_NUMBER: _ClassVar[int]
    machine_class_json: bytes
    secret_data: _containers.ScalarMap[str, bytes]
    def __init__(self, machine_class_json: _Optional[bytes] = ..., secret_data: _Optional[_Mapping[str, bytes]] = ...) -> None: ...

class ListMachinesResponse(_message.Message):
    __slots__ = ("machine_list",)
    class MachineListEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MACHINE_LIST_FIELD_NUMBER: _ClassVar[int]
    machine_list: _containers.ScalarMap[str, str]
    def __init__(self, machine_list: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GetVolumeIDsRequest(_message.Message):
    __slots__ = ("pv_specs_json",)
    PV_SPECS_JSON_FIELD_NUMBER: _ClassVar[int]
    pv_specs_json: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, pv_specs_json: _Optional[_Iterable[bytes]] = ...) -> None: ...

class GetVolumeIDsResponse(_message.Message):
    __slots__ = ("volume_ids",)
    VOLUME_IDS_FIELD_NUMBER: _ClassVar[int]
    volume_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, volume_ids: _Optional[_Iterable[str]] = ...) -> None: ...
