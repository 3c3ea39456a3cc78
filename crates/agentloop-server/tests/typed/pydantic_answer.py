"""A Python client of agentloop's typed answers: it sends the JSON Schema of a pydantic model
with `POST /v1/runs` (`stream: false`) and validates the answer's `output` into the model.

Usage: pydantic_answer.py BASE_URL API_KEY
Prints the validated model as JSON on stdout; exits non-zero when the answer does not fit.
"""

import json
import sys
import urllib.request
from enum import Enum

from pydantic import BaseModel, Field


class Priority(str, Enum):
    low = "low"
    high = "high"
    urgent = "urgent"


class Ticket(BaseModel):
    title: str = Field(min_length=1)
    priority: Priority
    tags: list[str]


def main() -> None:
    base_url, key = sys.argv[1], sys.argv[2]
    body = {
        "query": "File a ticket about the checkout page",
        "stream": False,
        "output": {"name": "ticket", "schema": Ticket.model_json_schema()},
    }
    request = urllib.request.Request(
        f"{base_url}/v1/runs",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.load(response)
    if answer["status"] != "completed":
        sys.exit(f"the run ended {answer['status']}: {answer.get('error')}")
    ticket = Ticket.model_validate(answer["output"])
    # The answer's text is the same value, as JSON.
    assert Ticket.model_validate_json(answer["answer"]) == ticket
    print(ticket.model_dump_json())


if __name__ == "__main__":
    main()
