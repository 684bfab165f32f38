"""``zot mcp``'s ``subscriptions/listen`` streams (MCP 2026-07-28): the
``mcp`` package's handler, ended gracefully when the host's input ends.

A host of the 2026-07-28 revision learns of changed tools and prompts only on
the streams it opens with ``subscriptions/listen``; each stays open (its
request unanswered) until the server ends it. At the end of stdin,
:meth:`EndingListen.end` ends the open streams with their final result, and a
stream whose request was read before the end but is handled only after it is
acknowledged and ended at once, so no request is left waiting.
"""

from __future__ import annotations

from typing import Any

import mcp.types as mt
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import SUBSCRIPTION_ID_META_KEY, ListenHandler


class EndingListen(ListenHandler):
    """A :class:`ListenHandler` that :meth:`end` closes for good."""

    ended = False

    def end(self) -> None:
        """Ends the open streams, and every stream asked for from now on."""
        self.ended = True
        self.close()

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: mt.SubscriptionsListenRequestParams
    ) -> mt.SubscriptionsListenResult:
        if not self.ended:
            # The package's handler registers its stream before its first
            # wait, so an end() after this line closes it.
            return await super().__call__(ctx, params)
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        asked = params.notifications
        honored = mt.SubscriptionFilter(
            tools_list_changed=True if asked.tools_list_changed else None,
            prompts_list_changed=True if asked.prompts_list_changed else None,
        )
        await ctx.session.send_notification(
            mt.SubscriptionsAcknowledgedNotification(
                params=mt.SubscriptionsAcknowledgedNotificationParams(
                    notifications=honored, _meta=meta
                )
            ),
            related_request_id=ctx.request_id,
        )
        return mt.SubscriptionsListenResult(_meta=meta)
