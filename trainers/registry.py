"""A tiny name -> object registry with one lookup that lists the valid names on error."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps the names a config field may take to the objects that implement them."""

    def __init__(self, field: str) -> None:
        self.field = field
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def add(obj: T) -> T:
            if name in self._items:
                raise KeyError(f"{self.field}: {name!r} registered twice")
            self._items[name] = obj
            return obj

        return add

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise ValueError(
                f"{self.field}: {name!r} is not allowed; choose one of: {', '.join(self._items)}"
            ) from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._items)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)
