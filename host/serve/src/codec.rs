//! gRPC codecs that decode requests with prost and write responses straight from the
//! cache's shared bytes (see `xdst_core::wire`). Buffers start small: an idle stream
//! should cost as little as possible.

use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::{BufMut, Bytes};
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use xdst_core::delta::DeltaResponse;
use xdst_core::sotw::SotwResponse;
use xdst_core::wire;

/// Initial per-stream buffer size; buffers grow for large messages.
const BUFFER: usize = 512;
/// Flush the encode buffer to the socket past this many bytes.
const YIELD: usize = 32 * 1024;

/// Something the server writes.
pub trait Outgoing: Send + 'static {
    fn encoded_len(&self) -> usize;
    fn encode(&self, buf: &mut impl BufMut);
}

impl Outgoing for SotwResponse {
    fn encoded_len(&self) -> usize {
        wire::sotw_len(self)
    }
    fn encode(&self, buf: &mut impl BufMut) {
        wire::encode_sotw(self, buf)
    }
}

impl Outgoing for DeltaResponse {
    fn encoded_len(&self) -> usize {
        wire::delta_len(self)
    }
    fn encode(&self, buf: &mut impl BufMut) {
        wire::encode_delta(self, buf)
    }
}

/// A server stream's response body: each message framed in an allocation of its own, sized
/// exactly and freed once written, then the stream's status as trailers. tonic's encoder
/// copies every message of a stream into one buffer that then keeps the size of the largest
/// message for as long as the stream lives: with large configurations that is most of an
/// idle stream's memory (250 KB each at 1,000 routes and 1,000 Services; docs/PERFORMANCE.md,
/// "Where the memory goes at scale").
///
/// Under `--max-unread-bytes-per-client` ([`crate::unread`]) a message is handed out in
/// pieces, one in flight at a time, once its client's budget has room for it; a stream reset
/// for not reading ends with RST_STREAM ENHANCE_YOUR_CALM.
pub struct ResponseBody<Resp> {
    body: Body<Resp>,
}

enum Body<Resp> {
    Whole(Option<BoxStream<'static, Result<Resp, Status>>>),
    Budgeted(Option<BoxStream<'static, Result<http_body::Frame<Bytes>, Status>>>),
}

/// A budgeted body's state between frames.
struct Outbox<Resp> {
    messages: BoxStream<'static, Result<Resp, Status>>,
    stream: Arc<crate::unread::Stream>,
    /// Where a stream reset for not reading is counted.
    serving: Arc<crate::Serving>,
    pieces: Option<crate::unread::Pieces>,
    /// How the stream ends, once what was framed with the last messages is handed out.
    ending: Option<Status>,
    done: bool,
}

impl<Resp: Outgoing> ResponseBody<Resp> {
    /// `unread`: the stream's share of its client's budget, and the serving plane that counts
    /// a reset; None without a limit.
    pub fn new(
        messages: BoxStream<'static, Result<Resp, Status>>,
        unread: Option<(Arc<crate::unread::Stream>, Arc<crate::Serving>)>,
    ) -> Self {
        let body = match unread {
            None => Body::Whole(Some(messages)),
            Some((stream, serving)) => {
                let outbox = Outbox { messages, stream, serving, pieces: None, ending: None, done: false };
                Body::Budgeted(Some(Box::pin(futures::stream::unfold(outbox, Outbox::next))))
            }
        };
        ResponseBody { body }
    }
}

impl<Resp: Outgoing> Outbox<Resp> {
    /// The next frame: a piece of the message being handed out, once the last one is written;
    /// else the next message's first piece, once the budget has room for it; else the trailers.
    async fn next(mut self) -> Option<(Result<http_body::Frame<Bytes>, Status>, Self)> {
        if self.done {
            return None;
        }
        // Polled: whatever this waits on, a reset reaches it.
        self.stream.set_parked(true);
        // The waits that are not the idle one are boxed: this future lives as long as the
        // stream, sized for its largest wait.
        if self.stream.waits_for_piece()
            && let Err(reset) = Box::pin(self.stream.piece_written()).await
        {
            return Some(self.reset(reset));
        }
        if let Some(piece) = self.pieces.as_mut().and_then(crate::unread::Pieces::next_piece) {
            self.stream.set_parked(false);
            return Some((Ok(http_body::Frame::data(piece)), self));
        }
        self.pieces = None;
        // Nothing of this stream is unread now (its last piece was written), so no reset can
        // be meant for it while it waits for its next message; one that came as it was written
        // still ends it.
        if self.stream.is_reset() {
            let max = self.stream.max();
            return Some(self.reset(crate::unread::Reset { max }));
        }
        if let Some(status) = self.ending.take() {
            return Some(self.end(&status));
        }
        let message = match self.messages.next().await {
            Some(Ok(message)) => message,
            Some(Err(status)) => return Some(self.end(&status)),
            None => return Some(self.end(&Status::ok(""))),
        };
        // Responses already waiting go out with it, up to a piece: a change that touches every
        // type is one write to the client, not one per type (and one wake-up of each side).
        let mut len = 5 + message.encoded_len();
        let mut messages = vec![message];
        while len < crate::unread::PIECE && self.ending.is_none() {
            match self.messages.next().now_or_never() {
                Some(Some(Ok(m))) => {
                    len += 5 + m.encoded_len();
                    messages.push(m);
                }
                Some(Some(Err(status))) => self.ending = Some(status),
                Some(None) => self.ending = Some(Status::ok("")),
                None => break,
            }
        }
        let claimed = match self.stream.try_claim(len) {
            Some(claim) => Ok((claim, messages)),
            None => wait_for_room(self.stream.clone(), self.serving.clone(), len, messages).await,
        };
        let (claim, messages) = match claimed {
            Ok(c) => c,
            Err(reset) => return Some(self.reset(reset)),
        };
        let mut pieces = self.stream.pieces(frame_all(&messages, len), claim);
        let first = pieces.next_piece().expect("a frame is at least its 5-byte header");
        self.pieces = Some(pieces);
        self.stream.set_parked(false);
        Some((Ok(http_body::Frame::data(first)), self))
    }

    /// Ends the stream with `status` as trailers.
    fn end(mut self, status: &Status) -> (Result<http_body::Frame<Bytes>, Status>, Self) {
        self.done = true;
        (Ok(http_body::Frame::trailers(trailers(status))), self)
    }

    /// Ends the stream with RST_STREAM ENHANCE_YOUR_CALM (gRPC clients report
    /// RESOURCE_EXHAUSTED): a client that does not read would never see trailers, and the reset
    /// frees what was queued for it.
    fn reset(mut self, reset: crate::unread::Reset) -> (Result<http_body::Frame<Bytes>, Status>, Self) {
        self.done = true;
        self.pieces = None;
        let mut status = Status::resource_exhausted(format!(
            "this stream's responses were not read while its client had more unread than \
             --max-unread-bytes-per-client allows ({} bytes)",
            reset.max
        ));
        status.set_source(Arc::new(h2::Error::from(h2::Reason::ENHANCE_YOUR_CALM)));
        (Err(status), self)
    }
}

/// A wait for room, and what it was for.
type Room<Resp> = Pin<Box<dyn Future<Output = Result<(crate::unread::Claim, Vec<Resp>), crate::unread::Reset>> + Send>>;

/// Waits for room for `message` under its client's budget ([`crate::unread::Stream::claim`]),
/// boxed, with the message moved in: the stream's own future, which lives as long as the
/// stream, keeps only a pointer for this wait.
fn wait_for_room<Resp: Outgoing>(
    stream: Arc<crate::unread::Stream>,
    serving: Arc<crate::Serving>,
    len: usize,
    message: Vec<Resp>,
) -> Room<Resp> {
    Box::pin(async move {
        let refused = |client: &str| serving.refused("unread_bytes", client);
        stream.claim(len, &refused).await.map(|claim| (claim, message))
    })
}

/// A gRPC message frame: the uncompressed flag, the length, the message.
pub fn frame(message: &impl Outgoing) -> Bytes {
    Bytes::from(frame_vec(message))
}

/// Bytes of responses framed since the server started: [`crate::memory`] hands freed memory
/// back after a burst of them.
pub static FRAMED_BYTES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn frame_vec(message: &impl Outgoing) -> Vec<u8> {
    frame_all(std::slice::from_ref(message), 5 + message.encoded_len())
}

/// `messages` framed one after the other, `len` bytes in all.
fn frame_all(messages: &[impl Outgoing], len: usize) -> Vec<u8> {
    FRAMED_BYTES.fetch_add(len as u64, std::sync::atomic::Ordering::Relaxed);
    let mut buf = Vec::with_capacity(len);
    for message in messages {
        buf.push(0);
        buf.extend_from_slice(&u32::try_from(message.encoded_len()).unwrap_or(u32::MAX).to_be_bytes());
        message.encode(&mut buf);
    }
    debug_assert_eq!(buf.len(), len);
    buf
}

/// The trailers that end a stream with `status`.
fn trailers(status: &Status) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    if status.add_header(&mut headers).is_err() {
        // Only a message that is no header value fails; the code alone still says it.
        headers.insert(Status::GRPC_STATUS, http::HeaderValue::from(status.code() as i32));
    }
    headers
}

impl<Resp: Outgoing> http_body::Body for ResponseBody<Resp> {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<http_body::Frame<Bytes>, Status>>> {
        match &mut self.get_mut().body {
            Body::Whole(slot) => {
                let Some(messages) = slot.as_mut() else { return Poll::Ready(None) };
                let frame = match ready!(messages.poll_next_unpin(cx)) {
                    Some(Ok(message)) => http_body::Frame::data(frame(&message)),
                    Some(Err(status)) => {
                        *slot = None;
                        http_body::Frame::trailers(trailers(&status))
                    }
                    None => {
                        *slot = None;
                        http_body::Frame::trailers(trailers(&Status::ok("")))
                    }
                };
                Poll::Ready(Some(Ok(frame)))
            }
            Body::Budgeted(slot) => {
                let Some(frames) = slot.as_mut() else { return Poll::Ready(None) };
                let next = ready!(frames.poll_next_unpin(cx));
                if next.is_none() {
                    *slot = None;
                }
                Poll::Ready(next)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.body, Body::Whole(None) | Body::Budgeted(None))
    }
}

/// Decodes `Req` with prost, encodes `Resp` from shared bytes.
pub struct XdsCodec<Req, Resp>(PhantomData<fn() -> (Req, Resp)>);

impl<Req, Resp> Default for XdsCodec<Req, Resp> {
    fn default() -> Self {
        XdsCodec(PhantomData)
    }
}

pub struct XdsEncoder<Resp>(PhantomData<fn() -> Resp>);
pub struct XdsDecoder<Req>(PhantomData<fn() -> Req>);

impl<Req> Default for XdsDecoder<Req> {
    fn default() -> Self {
        XdsDecoder(PhantomData)
    }
}

impl<Req, Resp> Codec for XdsCodec<Req, Resp>
where
    Req: Message + Default + Send + 'static,
    Resp: Outgoing,
{
    type Encode = Resp;
    type Decode = Req;
    type Encoder = XdsEncoder<Resp>;
    type Decoder = XdsDecoder<Req>;

    fn encoder(&mut self) -> Self::Encoder {
        XdsEncoder(PhantomData)
    }
    fn decoder(&mut self) -> Self::Decoder {
        XdsDecoder(PhantomData)
    }
}

impl<Resp: Outgoing> Encoder for XdsEncoder<Resp> {
    type Item = Resp;
    type Error = Status;

    fn encode(&mut self, item: Resp, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.reserve(item.encoded_len());
        item.encode(dst);
        Ok(())
    }
    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(BUFFER, YIELD)
    }
}

/// INVALID_ARGUMENT for a request that does not decode as a `Req`.
pub fn malformed<Req>(e: prost::DecodeError) -> Status {
    Status::invalid_argument(format!(
        "malformed {}: {e}",
        std::any::type_name::<Req>().rsplit("::").next().unwrap_or("request")
    ))
}

impl<Req: Message + Default> Decoder for XdsDecoder<Req> {
    type Item = Req;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Req>, Status> {
        Req::decode(src).map(Some).map_err(malformed::<Req>)
    }
    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(BUFFER, YIELD)
    }
}
