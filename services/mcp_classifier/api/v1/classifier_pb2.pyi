from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EmbedRequest(_message.Message):
    __slots__ = ("texts", "kind")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        QUERY: _ClassVar[EmbedRequest.Kind]
        DOCUMENT: _ClassVar[EmbedRequest.Kind]
    QUERY: EmbedRequest.Kind
    DOCUMENT: EmbedRequest.Kind
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    kind: EmbedRequest.Kind
    def __init__(self, texts: _Optional[_Iterable[str]] = ..., kind: _Optional[_Union[EmbedRequest.Kind, str]] = ...) -> None: ...

class EmbedResponse(_message.Message):
    __slots__ = ("vectors", "dimensions", "model_id")
    VECTORS_FIELD_NUMBER: _ClassVar[int]
    DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    vectors: bytes
    dimensions: int
    model_id: str
    def __init__(self, vectors: _Optional[bytes] = ..., dimensions: _Optional[int] = ..., model_id: _Optional[str] = ...) -> None: ...

class ClassifyRequest(_message.Message):
    __slots__ = ("texts", "with_probabilities", "classifier")
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    WITH_PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    CLASSIFIER_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    with_probabilities: bool
    classifier: str
    def __init__(self, texts: _Optional[_Iterable[str]] = ..., with_probabilities: _Optional[bool] = ..., classifier: _Optional[str] = ...) -> None: ...

class Classification(_message.Message):
    __slots__ = ("class_index", "category", "confidence", "model", "use_reasoning", "probabilities", "entropy", "out_of_scope", "labels", "margin", "model_id", "category_set_version", "policy_version", "language", "language_unserved", "label_scores")
    CLASS_INDEX_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    USE_REASONING_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    ENTROPY_FIELD_NUMBER: _ClassVar[int]
    OUT_OF_SCOPE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    MARGIN_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_SET_VERSION_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_UNSERVED_FIELD_NUMBER: _ClassVar[int]
    LABEL_SCORES_FIELD_NUMBER: _ClassVar[int]
    class_index: int
    category: str
    confidence: float
    model: str
    use_reasoning: bool
    probabilities: _containers.RepeatedScalarFieldContainer[float]
    entropy: float
    out_of_scope: bool
    labels: _containers.RepeatedScalarFieldContainer[str]
    margin: float
    model_id: str
    category_set_version: str
    policy_version: str
    language: str
    language_unserved: bool
    label_scores: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, class_index: _Optional[int] = ..., category: _Optional[str] = ..., confidence: _Optional[float] = ..., model: _Optional[str] = ..., use_reasoning: _Optional[bool] = ..., probabilities: _Optional[_Iterable[float]] = ..., entropy: _Optional[float] = ..., out_of_scope: _Optional[bool] = ..., labels: _Optional[_Iterable[str]] = ..., margin: _Optional[float] = ..., model_id: _Optional[str] = ..., category_set_version: _Optional[str] = ..., policy_version: _Optional[str] = ..., language: _Optional[str] = ..., language_unserved: _Optional[bool] = ..., label_scores: _Optional[_Iterable[float]] = ...) -> None: ...

class ClassifyResponse(_message.Message):
    __slots__ = ("results", "category_set_version", "policy_version", "model_id")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_SET_VERSION_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[Classification]
    category_set_version: str
    policy_version: str
    model_id: str
    def __init__(self, results: _Optional[_Iterable[_Union[Classification, _Mapping]]] = ..., category_set_version: _Optional[str] = ..., policy_version: _Optional[str] = ..., model_id: _Optional[str] = ...) -> None: ...

class InfoRequest(_message.Message):
    __slots__ = ("classifier",)
    CLASSIFIER_FIELD_NUMBER: _ClassVar[int]
    classifier: str
    def __init__(self, classifier: _Optional[str] = ...) -> None: ...

class Category(_message.Message):
    __slots__ = ("name", "description", "system_prompt")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    system_prompt: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., system_prompt: _Optional[str] = ...) -> None: ...

class InfoResponse(_message.Message):
    __slots__ = ("model_id", "category_set_version", "policy_version", "index_size", "temperature", "leave_one_out_accuracy", "device", "dtype", "pooling", "categories", "config_json", "batch_stats", "reload_error", "scoring", "scope_json", "served_languages", "language_min_confidence", "classifiers")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_SET_VERSION_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    INDEX_SIZE_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    LEAVE_ONE_OUT_ACCURACY_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    POOLING_FIELD_NUMBER: _ClassVar[int]
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    BATCH_STATS_FIELD_NUMBER: _ClassVar[int]
    RELOAD_ERROR_FIELD_NUMBER: _ClassVar[int]
    SCORING_FIELD_NUMBER: _ClassVar[int]
    SCOPE_JSON_FIELD_NUMBER: _ClassVar[int]
    SERVED_LANGUAGES_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_MIN_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    CLASSIFIERS_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    category_set_version: str
    policy_version: str
    index_size: int
    temperature: float
    leave_one_out_accuracy: float
    device: str
    dtype: str
    pooling: str
    categories: _containers.RepeatedCompositeFieldContainer[Category]
    config_json: str
    batch_stats: BatchStats
    reload_error: str
    scoring: str
    scope_json: str
    served_languages: _containers.RepeatedScalarFieldContainer[str]
    language_min_confidence: float
    classifiers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, model_id: _Optional[str] = ..., category_set_version: _Optional[str] = ..., policy_version: _Optional[str] = ..., index_size: _Optional[int] = ..., temperature: _Optional[float] = ..., leave_one_out_accuracy: _Optional[float] = ..., device: _Optional[str] = ..., dtype: _Optional[str] = ..., pooling: _Optional[str] = ..., categories: _Optional[_Iterable[_Union[Category, _Mapping]]] = ..., config_json: _Optional[str] = ..., batch_stats: _Optional[_Union[BatchStats, _Mapping]] = ..., reload_error: _Optional[str] = ..., scoring: _Optional[str] = ..., scope_json: _Optional[str] = ..., served_languages: _Optional[_Iterable[str]] = ..., language_min_confidence: _Optional[float] = ..., classifiers: _Optional[_Iterable[str]] = ...) -> None: ...

class BatchStats(_message.Message):
    __slots__ = ("batches", "texts", "largest_batch", "batch_size_counts")
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    LARGEST_BATCH_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    batches: int
    texts: int
    largest_batch: int
    batch_size_counts: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, batches: _Optional[int] = ..., texts: _Optional[int] = ..., largest_batch: _Optional[int] = ..., batch_size_counts: _Optional[_Iterable[int]] = ...) -> None: ...
