"""Server-side form validation: collect field errors, keep what the user typed, render both back."""

from __future__ import annotations

import re
from collections.abc import Collection
from decimal import Decimal, InvalidOperation

from starlette.datastructures import FormData

EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")


class Form:
    """Values as typed (stripped) plus ``errors`` by field name; ``ok`` when nothing failed."""

    def __init__(self, data: FormData | dict[str, str]) -> None:
        self.values: dict[str, str] = {}
        for key, value in data.items():
            if isinstance(value, str):
                self.values[key] = value.strip()
        self.errors: dict[str, str] = {}

    @property
    def ok(self) -> bool:
        return not self.errors

    def get(self, name: str, default: str = "") -> str:
        return self.values.get(name, default)

    def error(self, name: str, message: str) -> None:
        self.errors.setdefault(name, message)

    def required(self, name: str, label: str, max_length: int = 200) -> str:
        value = self.get(name)
        if not value:
            self.error(name, f"{label} is required.")
        elif len(value) > max_length:
            self.error(name, f"{label} must be at most {max_length} characters.")
        return value

    def optional(self, name: str, label: str, max_length: int = 2000) -> str:
        value = self.get(name)
        if len(value) > max_length:
            self.error(name, f"{label} must be at most {max_length} characters.")
        return value

    def email(self, name: str, label: str = "Email address") -> str:
        value = self.required(name, label).lower()
        if value and name not in self.errors and not EMAIL.match(value):
            self.error(name, "Enter a valid email address, like name@example.com.")
        return value

    def integer(self, name: str, label: str, minimum: int | None = None, maximum: int | None = None) -> int | None:
        raw = self.get(name)
        if not raw:
            self.error(name, f"{label} is required.")
            return None
        try:
            value = int(raw)
        except ValueError:
            self.error(name, f"{label} must be a whole number.")
            return None
        if minimum is not None and value < minimum:
            self.error(name, f"{label} must be at least {minimum}.")
        elif maximum is not None and value > maximum:
            self.error(name, f"{label} must be at most {maximum}.")
        return value

    def money(self, name: str, label: str, required: bool = True) -> int | None:
        """A price like ``19.99`` or ``$1,299`` in cents; more than two decimals or <= 0 is an error."""
        raw = self.get(name).replace("$", "").replace(",", "")
        if not raw:
            if required:
                self.error(name, f"{label} is required.")
            return None
        try:
            value = Decimal(raw)
        except InvalidOperation:
            self.error(name, f"{label} must be an amount like 19.99.")
            return None
        if not value.is_finite():
            self.error(name, f"{label} must be an amount like 19.99.")
            return None
        exponent = value.as_tuple().exponent
        if isinstance(exponent, int) and exponent < -2:
            self.error(name, f"{label} can have at most two decimal places.")
            return None
        if value <= 0:
            self.error(name, f"{label} must be greater than zero.")
            return None
        if value >= 1_000_000:
            self.error(name, f"{label} must be less than 1,000,000.")
            return None
        return int(value * 100)

    def choice(self, name: str, label: str, choices: Collection[str]) -> str:
        value = self.get(name)
        if value not in choices:
            self.error(name, f"Choose a valid {label.lower()}.")
        return value

    def password(self, name: str, confirm: str | None = None, label: str = "Password") -> str:
        value = self.values.get(name, "")
        if len(value) < 8:
            self.error(name, f"{label} must be at least 8 characters.")
        elif not (re.search(r"[A-Za-z]", value) and re.search(r"[0-9]", value)):
            self.error(name, f"{label} must contain letters and numbers.")
        if confirm is not None and self.values.get(confirm, "") != value:
            self.error(confirm, "The passwords do not match.")
        return value
