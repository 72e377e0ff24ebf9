"""The peer of tests/python/sdk_server.py built on the official Python SDK 0.3 instead
(a2a-sdk[http-server] 0.3 and uvicorn): A2A 0.3 only, its card at /.well-known/agent-card.json and
JSON-RPC at /. The same AgentExecutor, by the text of a task's first message:

* `ask ...`: the task goes to input-required asking "Your answer?"; the reply completes it with an
  artifact `answer.txt` holding the reply's text;
* `slow ...`: working, about a second of work, then an artifact `echo.txt` and completed;
* anything else: an artifact `echo.txt` holding "Echo: <text>", then completed.

Cancel ends a task canceled. Usage: python sdk_server_0_3.py <port>
"""

import asyncio
import sys

import uvicorn

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentSkill,
    Part,
    TaskState,
    TextPart,
)
from a2a.utils import new_task

SLOW_SECONDS = 1.0


def card(url):
    return AgentCard(
        name="sdk-peer-0.3",
        description="The official A2A Python SDK 0.3 as a peer: echo, ask, slow",
        url=url,
        version="1.0.0",
        preferred_transport="JSONRPC",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="peer",
                name="Peer",
                description="echo; `ask` asks for input; `slow` runs for a second",
                tags=["test"],
            )
        ],
    )


def text_part(text):
    return Part(root=TextPart(text=text))


class Peer(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task
        if task is None:
            task = new_task(context.message)
            await event_queue.enqueue_event(task)
            answering = False
        else:
            answering = task.status.state == TaskState.input_required
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if answering:
            await updater.start_work()
            await updater.add_artifact([text_part(text)], name="answer.txt")
            await updater.complete()
            return
        if text.startswith("ask"):
            question = updater.new_agent_message([text_part("Your answer?")])
            await updater.requires_input(question, final=True)
            return
        if text.startswith("slow"):
            await updater.start_work()
            await asyncio.sleep(SLOW_SECONDS)
        await updater.add_artifact([text_part(f"Echo: {text}")], name="echo.txt")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        updater = TaskUpdater(
            event_queue,
            context.task_id,
            task.context_id if task is not None else context.context_id,
        )
        await updater.cancel()


def main():
    port = int(sys.argv[1])
    agent = card(f"http://127.0.0.1:{port}/")
    handler = DefaultRequestHandler(agent_executor=Peer(), task_store=InMemoryTaskStore())
    app = A2AStarletteApplication(agent_card=agent, http_handler=handler).build()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
