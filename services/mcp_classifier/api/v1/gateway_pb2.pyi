from mcp_classifier.api.v1 import classifier_pb2 as _classifier_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ClassifyTextRequest(_message.Message):
    __slots__ = ("text", "with_probabilities", "classifier")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    WITH_PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    CLASSIFIER_FIELD_NUMBER: _ClassVar[int]
    text: str
    with_probabilities: bool
    classifier: str
    def __init__(self, text: _Optional[str] = ..., with_probabilities: _Optional[bool] = ..., classifier: _Optional[str] = ...) -> None: ...

class ClassifyTextResponse(_message.Message):
    __slots__ = ("result", "trace_id")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    result: _classifier_pb2.Classification
    trace_id: str
    def __init__(self, result: _Optional[_Union[_classifier_pb2.Classification, _Mapping]] = ..., trace_id: _Optional[str] = ...) -> None: ...

class ClassifyBatchItem(_message.Message):
    __slots__ = ("result", "error")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    result: _classifier_pb2.Classification
    error: str
    def __init__(self, result: _Optional[_Union[_classifier_pb2.Classification, _Mapping]] = ..., error: _Optional[str] = ...) -> None: ...

class ClassifyBatchResponse(_message.Message):
    __slots__ = ("results", "classified", "failed", "trace_id")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CLASSIFIED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ClassifyBatchItem]
    classified: int
    failed: int
    trace_id: str
    def __init__(self, results: _Optional[_Iterable[_Union[ClassifyBatchItem, _Mapping]]] = ..., classified: _Optional[int] = ..., failed: _Optional[int] = ..., trace_id: _Optional[str] = ...) -> None: ...

class ListCategoriesRequest(_message.Message):
    __slots__ = ("classifier",)
    CLASSIFIER_FIELD_NUMBER: _ClassVar[int]
    classifier: str
    def __init__(self, classifier: _Optional[str] = ...) -> None: ...

class ListCategoriesResponse(_message.Message):
    __slots__ = ("categories", "trace_id")
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    categories: _containers.RepeatedCompositeFieldContainer[_classifier_pb2.Category]
    trace_id: str
    def __init__(self, categories: _Optional[_Iterable[_Union[_classifier_pb2.Category, _Mapping]]] = ..., trace_id: _Optional[str] = ...) -> None: ...
