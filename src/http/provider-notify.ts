/** The provider-notification endpoint: where a real provider posts its signed notices. */
import type { FastifyInstance } from 'fastify';
import { ProviderNotificationError } from '../providers/provider.ts';
import type { Services } from '../services.ts';
import { handleProviderNotification } from '../usecases/notifications.ts';

export async function providerNotifyPlugin(scope: FastifyInstance, opts: { svc: Services }): Promise<void> {
  const { svc } = opts;
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: 64 * 1024 }, (_req, body, done) => done(null, body));
  // Refused before the handler (a body over 64 KB, a malformed Content-Length): the provider's
  // envelope too, so that it reads `received: false` whatever went wrong.
  scope.setErrorHandler((err: Error & { statusCode?: number; code?: string }, req, reply) => {
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return reply.code(413).send({ received: false, error: 'the body is over 64 KB' });
    if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
      return reply.code(400).send({ received: false, error: err.message });
    }
    req.log.error({ err }, 'provider notification failed');
    return reply.code(503).send({ received: false });
  });
  scope.post(`/${svc.provider.name}`, async (req, reply) => {
    try {
      await handleProviderNotification(svc, (req.body as Buffer | undefined) ?? Buffer.alloc(0), req.headers);
      return reply.code(200).send({ received: true });
    } catch (err) {
      if (err instanceof ProviderNotificationError) return reply.code(400).send({ received: false, error: err.message });
      req.log.error({ err }, 'provider notification failed');
      return reply.code(503).send({ received: false });
    }
  });
}
