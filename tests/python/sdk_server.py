"""An A2A agent built on the official Python SDK 1.x (a2a-sdk[http-server] and uvicorn), the peer
radkit's own A2A client is tested against (tests/a2a_client.rs). It serves the agent card at
/.well-known/agent-card.json and JSON-RPC at / for A2A 1.0, with the SDK's 0.3 compatibility on the
same endpoint (the card lists both interfaces). One AgentExecutor, by the text of a task's first
message:

* `ask ...`: the task goes to input-required asking "Your answer?"; the reply completes it with an
  artifact `answer.txt` holding the reply's text;
* `slow ...`: working, about a second of work, then an artifact `echo.txt` and completed;
* anything else: an artifact `echo.txt` holding "Echo: <text>", then completed.

Cancel ends a task canceled. With `--push` the card says the agent pushes notifications and the
SDK's own push sender (`BasePushNotificationSender`, configs in `InMemoryPushNotificationConfigStore`)
posts the task's updates to the webhooks a client gives (as radkit's call webhook is).

With `--rest` the agent serves HTTP+JSON (the SDK's REST routes) instead of JSON-RPC, and with
`--grpc <port>` gRPC on that port (the SDK's `GrpcHandler` on a `grpc.aio` server) instead of
JSON-RPC; the card, still at /.well-known/agent-card.json on <port>, lists only the binding served,
so a client must pick it from `supportedInterfaces`.

Usage: python sdk_server.py <port> [--push] [--rest | --grpc <grpc-port>]
"""

import asyncio
import sys

import httpx
import uvicorn
from starlette.applications import Starlette

import a2a.types as T
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)

SLOW_SECONDS = 1.0


def card(interfaces, push=False):
    return T.AgentCard(
        name="sdk-peer",
        description="The official A2A Python SDK as a peer: echo, ask, slow",
        version="1.0.0",
        supported_interfaces=interfaces,
        capabilities=T.AgentCapabilities(streaming=True, push_notifications=push),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            T.AgentSkill(
                id="peer",
                name="Peer",
                description="echo; `ask` asks for input; `slow` runs for a second",
                tags=["test"],
            )
        ],
    )


class Peer(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task
        if task is None:
            task = T.Task(
                id=context.task_id,
                context_id=context.context_id,
                status=T.TaskStatus(state=T.TaskState.TASK_STATE_SUBMITTED),
                history=[context.message],
            )
            await event_queue.enqueue_event(task)
            answering = False
        else:
            answering = task.status.state == T.TaskState.TASK_STATE_INPUT_REQUIRED
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if answering:
            await updater.start_work()
            await updater.add_artifact([T.Part(text=text)], name="answer.txt")
            await updater.complete()
            return
        if text.startswith("ask"):
            question = updater.new_agent_message([T.Part(text="Your answer?")])
            await updater.requires_input(question)
            return
        if text.startswith("slow"):
            await updater.start_work()
            await asyncio.sleep(SLOW_SECONDS)
        await updater.add_artifact([T.Part(text=f"Echo: {text}")], name="echo.txt")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        updater = TaskUpdater(
            event_queue,
            context.task_id,
            task.context_id if task is not None else context.context_id,
        )
        await updater.cancel()


def interfaces(port, binding, grpc_port):
    url = f"http://127.0.0.1:{port}/"
    if binding == "rest":
        return [T.AgentInterface(
            url=f"http://127.0.0.1:{port}", protocol_binding="HTTP+JSON", protocol_version="1.0")]
    if binding == "grpc":
        return [T.AgentInterface(
            url=f"127.0.0.1:{grpc_port}", protocol_binding="GRPC", protocol_version="1.0")]
    return [
        T.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
        T.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
    ]


async def serve(port, binding, grpc_port, push):
    agent = card(interfaces(port, binding, grpc_port), push)
    pushing = {}
    if push:
        configs = InMemoryPushNotificationConfigStore()
        pushing = {
            "push_config_store": configs,
            "push_sender": BasePushNotificationSender(httpx.AsyncClient(), configs),
        }
    handler = DefaultRequestHandler(
        agent_executor=Peer(), task_store=InMemoryTaskStore(), agent_card=agent, **pushing
    )
    routes = create_agent_card_routes(agent)
    if binding == "rest":
        routes += create_rest_routes(handler)
    elif binding == "jsonrpc":
        routes += create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True)
    http = uvicorn.Server(uvicorn.Config(
        Starlette(routes=routes), host="127.0.0.1", port=port, log_level="warning"))
    if binding != "grpc":
        await http.serve()
        return
    import grpc
    from a2a.server.request_handlers import GrpcHandler
    from a2a.types import a2a_pb2_grpc

    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
    server.add_insecure_port(f"127.0.0.1:{grpc_port}")
    await server.start()
    try:
        await http.serve()
    finally:
        await server.stop(None)


def main():
    port = int(sys.argv[1])
    args = sys.argv[2:]
    push = "--push" in args
    binding, grpc_port = "jsonrpc", None
    if "--rest" in args:
        binding = "rest"
    if "--grpc" in args:
        binding, grpc_port = "grpc", int(args[args.index("--grpc") + 1])
    asyncio.run(serve(port, binding, grpc_port, push))


if __name__ == "__main__":
    main()
