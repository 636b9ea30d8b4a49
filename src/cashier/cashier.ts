/** The hosted cashier page behind payUrl (placeholder until the cashier issue lands). */
import type { FastifyInstance } from 'fastify';
import type { Services } from '../services.ts';

export async function cashierPlugin(scope: FastifyInstance, _opts: { svc: Services }): Promise<void> {
  scope.get('/:token', async (_req, reply) => reply.code(503).type('text/plain').send('cashier page not available yet'));
}
