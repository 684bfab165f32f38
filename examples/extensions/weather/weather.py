"""weather: a tool the model can call, typed with the Python SDK.

The SDK builds the tool's JSON Schema from the signature of ``weather`` (a
required string ``city``, an optional ``units`` that is ``"c"`` or ``"f"``)
and checks the model's arguments against it before the function runs: a
missing city or ``units: "k"`` comes back to the model as a tool error naming
the field. A city it does not know is a tool error too, from the function.

The data is canned (the table below): the example works offline, and its
answers are the same every time.
"""

from typing import Literal

from zotd.sdk import Extension, Result, tool_error

ext = Extension("weather", "1.0.0")

#: city (lower case) -> (name as shown, temperature in °C, sky)
CONDITIONS: dict[str, tuple[str, int, str]] = {
    "berlin": ("Berlin", 16, "fog"),
    "cairo": ("Cairo", 31, "clear sky"),
    "lisbon": ("Lisbon", 21, "sunny"),
    "new york": ("New York", 9, "light rain"),
    "oslo": ("Oslo", -3, "snow"),
    "tokyo": ("Tokyo", 12, "overcast"),
}


@ext.tool()
def weather(city: str, units: Literal["c", "f"] = "c") -> str | Result:
    """Current weather for a city: temperature and sky. units: "c" (default) or "f"."""
    known = CONDITIONS.get(" ".join(city.split()).casefold())
    if known is None:
        cities = ", ".join(name for name, _, _ in CONDITIONS.values())
        return tool_error(f"no weather for {city!r}; known cities: {cities}")
    name, celsius, sky = known
    degrees = celsius if units == "c" else round(celsius * 9 / 5 + 32)
    return f"{name}: {degrees}°{units.upper()}, {sky}"


if __name__ == "__main__":
    ext.run()
