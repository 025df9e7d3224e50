"""Page arithmetic and links that keep the rest of the query string (search, filters, sort) intact."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from starlette.datastructures import QueryParams


@dataclass(frozen=True)
class Pager:
    total: int
    page: int
    per_page: int
    path: str
    query: tuple[tuple[str, str], ...]

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page

    @property
    def first_item(self) -> int:
        return 0 if self.total == 0 else self.offset + 1

    @property
    def last_item(self) -> int:
        return min(self.total, self.offset + self.per_page)

    def url(self, page: int) -> str:
        params = [(k, v) for k, v in self.query if k != "page"]
        if page > 1:
            params.append(("page", str(page)))
        return self.path + ("?" + urlencode(params) if params else "")

    def window(self, size: int = 2) -> list[int | None]:
        """Page numbers to show: first, last and ``size`` around the current one; ``None`` marks a gap."""
        keep = {1, self.pages, *range(self.page - size, self.page + size + 1)}
        out: list[int | None] = []
        for n in range(1, self.pages + 1):
            if n in keep:
                out.append(n)
            elif out and out[-1] is not None:
                out.append(None)
        return out


def paginate(total: int, params: QueryParams, path: str, per_page: int) -> Pager:
    """A pager for ``total`` rows; a page number beyond the end lands on the last page, junk on the first."""
    try:
        page = int(params.get("page", "1"))
    except ValueError:
        page = 1
    pages = max(1, -(-total // per_page))
    page = min(max(page, 1), pages)
    return Pager(total=total, page=page, per_page=per_page, path=path, query=tuple(params.multi_items()))
